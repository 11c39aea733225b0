#!/usr/bin/env bash
# issue 31, 2026-11-29 (sixteenth session), call 6 (one H200): what a new GPU user sees with the shipped profile: the default
# inference run and the default training run on one GPU, the end-of-run tables as printed.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 150 python -m parbench workload=inference hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db 2>&1 \
  | grep -v INFO | tail -40 | tee $OUT/newuser_inference.txt
timeout 100 python -m parbench hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db 2>&1 | grep -v INFO | tail -30 \
  | tee $OUT/newuser_train.txt
