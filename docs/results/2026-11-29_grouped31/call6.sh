#!/usr/bin/env bash
# issue 31, 2026-11-29 (eighteenth session), call 6 (one H200): one MoE layer's kernels in a training step's forward
# and backward, eager and compiled (moe_kernels.py): the non-GEMM kernels the model's element-wise bytes lack.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 300 python docs/results/2026-11-29_grouped31/moe_kernels.py 2>&1 | grep -v -i warn > $OUT/moe_kernels.txt; cat $OUT/moe_kernels.txt
