#!/usr/bin/env bash
# issue 31, 2026-11-29 (fourteenth session), call 5 (one H200): what a new user sees with the checkout's profiles: the
# default run, the default inference run, and the elementwise microbenchmark at its defaults.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T=(tracking.uri=sqlite:////tmp/mlflow.db)
timeout 120 python -m parbench hardware.gpus_per_node=1 "${T[@]}" 2>&1 | grep -v "INFO\|\] step" | tee $OUT/default.log
timeout 120 python -m parbench workload=inference hardware.gpus_per_node=1 "${T[@]}" 2>&1 | grep -v "INFO\|\] step" | tee $OUT/default_inference.log
timeout 200 python -m parbench workload=elementwise hardware.gpus_per_node=1 "${T[@]}" 2>&1 | grep -v "INFO" | tee $OUT/elementwise.log
