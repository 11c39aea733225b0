#!/usr/bin/env bash
# 2026-11-28 (twelfth session): the accuracy benchmark's two-GPU cases (train2: dp, fsdp, tp, sp, cp on the 1B Llama and
# on the tiny model), measured into $OUT/accuracy_h200x2.jsonl as each ends; the tables with the shipped one-GPU profile,
# with the two-GPU calibration of 2026-11-28_h200x2_strategy31, and with only its strategy host figures are made from that
# file afterwards (benchmarks/predictor_accuracy.py table). FROM=<jsonl>: continue that file (its unsteady cases measured
# again). Two H200s only.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
[ "$(echo "$G" | grep -c H200)" -ge 2 ] || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
[ -n "${FROM:-}" ] && cp "$FROM" $OUT/accuracy_h200x2.jsonl
python benchmarks/predictor_accuracy.py measure --jsonl $OUT/accuracy_h200x2.jsonl --cases train2 --budget-s ${BUDGET_S:-420} \
  hardware=h200 2>&1 | grep -v "INFO\|\] step" | tee $OUT/measure.log
