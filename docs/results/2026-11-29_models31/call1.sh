#!/usr/bin/env bash
# issue 31, 2026-11-29 (seventeenth session), call 1 (one H200): models no calibration run and no list has
# (predictor_accuracy.py --cases unseen_models,unseen_moe): 7-8B dense inference and the 2.5B MoE's inference and
# training, each appended to the jsonl as it ends.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
J=$OUT/accuracy_models_h200.jsonl
timeout 540 python benchmarks/predictor_accuracy.py measure --jsonl $J --cases unseen_models,unseen_moe --budget-s 500 \
  hardware=h200 2>&1 | grep -v INFO | tail -60 > $OUT/measure.log
python benchmarks/predictor_accuracy.py table --jsonl $J --calibration conf/calibrations/h200.yaml \
  --out $OUT/accuracy_models_h200.md > /dev/null 2>&1; cat $OUT/accuracy_models_h200.md; tail -5 $OUT/measure.log
