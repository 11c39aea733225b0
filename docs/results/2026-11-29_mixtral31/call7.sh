#!/usr/bin/env bash
# issue 31, 2026-11-29 (twentieth session), mixtral31 call 7 (one H200, the host of calls 4-6): the 2-row grouped GEMM
# of Mixtral's w1 shape by router-like split (splits.py).
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 200 python docs/results/2026-11-29_mixtral31/splits.py 2>&1 | grep -v -i "warn\|USDT" | tee $OUT/splits.txt
