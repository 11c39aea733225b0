#!/usr/bin/env bash
# issue 31, 2026-12-07, one GPU: placement.py (where B's memory lies and the 2-row grouped GEMM's time)
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 200 python3 docs/results/2026-12-07_mixtral31/placement.py 2>&1 | grep -v Warn | tee $OUT/placement.txt
