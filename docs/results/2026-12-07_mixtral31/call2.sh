#!/usr/bin/env bash
# issue 31, 2026-12-07, one H200, call 2: bisect2.py (a B made before and after Mixtral's build, in one process)
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
cd benchmarks && PYTHONPATH=$PYTHONPATH:$PWD timeout 400 python3 ../docs/results/2026-12-07_mixtral31/bisect2.py 2>&1 | grep -v "Warn\|warn" | tee $OUT/bisect2.txt
