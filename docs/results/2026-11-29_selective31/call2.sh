#!/usr/bin/env bash
# issue 31, 2026-11-29 (twentieth session), call 2 (one H200): a layer's host dispatch by family and checkpointing mode
# (host_layers.py), at 2 x 64 tokens and, for the Llama and the MoE, at 4 x 1024; and what a layer dispatches on CUDA.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
S=docs/results/2026-11-29_selective31/host_layers.py
timeout 300 python $S llama3_2_1b gpt2_xl qwen3_1_7b moe_2_5b 2>&1 | grep -v -i "warn" | tee $OUT/host_layers.txt
HOST_TOKENS=4,1024 timeout 200 python $S llama3_2_1b moe_2_5b 2>&1 | grep -v -i "warn" | sed 's/^/4x1024 /' | tee -a $OUT/host_layers.txt
