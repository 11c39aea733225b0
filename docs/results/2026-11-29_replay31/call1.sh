#!/usr/bin/env bash
# issue 31, 2026-11-29 (fifteenth session), call 1 (one H200): a checkpointed layer's replay priced per layer and per
# op. `parbench calibrate` resumed from call 7's ledger (2026-11-29_elementwise31): only the new and changed host runs
# are measured (the 1B Llama selective, GPT-2 XL full and selective, 4 layers at 64 x 2); then the eager checkpointed
# cases no list holds (predictor_accuracy.py --cases unseen_replay), each appended to the jsonl as it ends.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=outputs/calibrate/h200_replay31; mkdir -p $W
cp docs/results/2026-11-29_elementwise31/call7/measured_h200.json $W/measured.json
timeout 300 python -m parbench calibrate hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db \
  --work $W --out $OUT/h200.yaml 2>&1 | grep -v INFO | tee $OUT/calibrate.log
cp $W/measured.json $OUT/measured_h200.json
J=$OUT/accuracy_replay_h200.jsonl; cp docs/results/2026-11-29_replay31/accuracy_replay_h200.jsonl $J 2>/dev/null
timeout 280 python benchmarks/predictor_accuracy.py measure --jsonl $J --cases unseen_replay --budget-s 250 hardware=h200 \
  2>&1 | grep -v INFO | tail -20 | tee $OUT/measure.log
[ -s $OUT/h200.yaml ] && python benchmarks/predictor_accuracy.py table --jsonl $J --calibration $OUT/h200.yaml \
  --out $OUT/accuracy_replay_h200.md > /dev/null 2>&1; cat $OUT/accuracy_replay_h200.md
