#!/usr/bin/env bash
# issue 31, 2026-11-29 (eighteenth session), call 3 (one H200): one MoE layer of moe_2_5b with the counting-sort
# dispatch, profiled (models31's moe_profile.py): which of a training step's non-GEMM kernels the model lacks.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 200 python docs/results/2026-11-29_models31/moe_profile.py > $OUT/moe_profile.txt 2>&1; grep "==" $OUT/moe_profile.txt
