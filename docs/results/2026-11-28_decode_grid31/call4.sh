#!/usr/bin/env bash
# issue 31, 2026-11-28 (thirteenth session), call 4: where a large batch's decode time goes beyond the model: the 1B
# Llama's native engine at 4 and 16 layers, batch 4 and 32, 1,024-token prompts (TPOT at two depths per batch: what
# grows per step and what per layer with the batch). H200 only.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 420 python -m parbench -m hardware=h200 hardware.gpus_per_node=1 workload=inference model=llama3_2_1b \
  model.layers=4,16 workload.batch_size=4,32 workload.input_len=1024 workload.output_len=32 workload.repeats=5 \
  workload.profile=false tracking.uri=sqlite:///$OUT/mlflow.db hydra.sweep.dir=$OUT/depths 2>&1 \
  | grep -v "INFO\|\] step" | tee $OUT/depths.txt
