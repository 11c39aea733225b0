#!/usr/bin/env bash
# issue 31, 2026-11-28 (thirteenth session), call 2: the decode attention call's kernels as the microbenchmark times it
# and as the engine's compiled static step runs it (call2_kernels.py). H200 only.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 400 python docs/results/2026-11-28_decode_grid31/call2_kernels.py 2>&1 | grep -v -i warn | tee $OUT/kernels.txt
