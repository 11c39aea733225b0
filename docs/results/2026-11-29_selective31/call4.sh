#!/usr/bin/env bash
# issue 31, 2026-11-29 (twentieth session), call 4 (one H200): a replayed layer's host cost against its calls, aten ops
# and kernel launches, four families on one host, interleaved over three rounds (host_units.py).
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 540 python docs/results/2026-11-29_selective31/host_units.py $OUT/host_units.json llama3_2_1b gpt2_xl qwen3_1_7b moe_2_5b \
  2>&1 | grep -v -i "warn\|USDT" | tee $OUT/host_units.txt
