# One call on the device machine (repo root; .whl carried): the unseen_scale cases, continuing the
# record in this folder if one is there, within a 540 s budget. Usage: bash docs/results/2026-11-29_scale31/measure.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
HERE=docs/results/2026-11-29_scale31
nvidia-smi -L > $OUT/machine.txt; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv >> $OUT/machine.txt
[ -f $HERE/accuracy_scale_h200.jsonl ] && cp $HERE/accuracy_scale_h200.jsonl $OUT/
python benchmarks/predictor_accuracy.py measure --jsonl $OUT/accuracy_scale_h200.jsonl --cases unseen_scale \
  --budget-s 540 hardware=h200 > $OUT/measure.log 2>&1
grep -E "^\\$|budget|Error|error:|Traceback" $OUT/measure.log | tail -40
