#!/usr/bin/env bash
# issue 31, 2026-11-29 (nineteenth session), call 3 (one H200): the grouped_matmul calibration run with few-row calls
# (2 to 128 rows over 8 matrices: a decode step's experts) beside the earlier shapes, resumed from the shipped ledger
# (only that run's args changed); grouped calls of Mixtral's and the 2.5B MoE's experts that no calibration times
# (validation); then the unseen_scale cases not measured yet (the MoEs' inference).
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
HERE=docs/results/2026-11-29_scale31
W=outputs/calibrate/h200_scale31; mkdir -p $W; cp docs/results/2026-11-29_grouped31/measured_h200.json $W/measured.json
timeout 200 python -m parbench calibrate hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db \
  --work $W --out $OUT/h200.yaml 2>&1 | grep -v INFO | grep "calibrate\]" | grep -v "measured before" > $OUT/calibrate.log
grep "grouped\|saved" $OUT/calibrate.log | cut -c1-200
cp $W/measured.json $OUT/measured_h200.json
R="hardware=h200 hardware.gpus_per_node=1 workload=matmul workload.dtype=bf16 tracking.uri=sqlite:////tmp/mlflow.db workload.iters=20 workload.routed_groups=true workload.groups=8"
for shapes in "[[2,4096,14336],[8,4096,14336],[64,4096,14336],[512,4096,14336],[2048,4096,14336],[16384,4096,14336],[2,14336,4096],[2048,14336,4096]]" \
              "[[2,2048,2816],[8,2048,2816],[64,2048,2816],[1024,2048,2816],[4096,2048,2816],[2,2816,2048]]"; do
  timeout 100 python -m parbench $R "workload.shapes=$shapes" hydra.run.dir=/tmp/mm > /dev/null 2>&1
  python -c "import json; m=json.load(open('/tmp/mm/results.json'))['metrics']; print(json.dumps({k: v for k, v in m.items() if k.startswith(('matmul_time_us/', 'matmul_groups_read/'))}))" >> $OUT/validation_matmul.jsonl
  rm -rf /tmp/mm
done
cat $OUT/validation_matmul.jsonl | cut -c1-600
cp $HERE/accuracy_scale_h200.jsonl $OUT/
timeout 300 python benchmarks/predictor_accuracy.py measure --jsonl $OUT/accuracy_scale_h200.jsonl --cases unseen_scale \
  --budget-s 280 hardware=h200 > $OUT/measure.log 2>&1
grep -E "^\\$|budget|Error|error:|Traceback" $OUT/measure.log | tail -20
