#!/usr/bin/env bash
# issue 31, 2026-11-29 (fourteenth session), call 3 (one H200): where GPT-2 XL's eager checkpointed steps go, the worst
# cases after the element-wise change (1024 x 4 full -19 %, 2048 x 2 selective -26.5 %), beside its unchecked step and
# Qwen3's host-bound selective case, which the model gets right: each step's kernels by kind against the model's parts
# (benchmarks/train_kernels.py, the profiler on), with the shipped profile.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
for case in "model=gpt2_xl workload.seq_len=1024 workload.batch_size=4 workload.activation_checkpointing=full" \
            "model=gpt2_xl workload.seq_len=1024 workload.batch_size=4" \
            "model=gpt2_xl workload.seq_len=2048 workload.batch_size=2 workload.activation_checkpointing=selective model.max_seq_len=2048" \
            "model=qwen3_1_7b workload.seq_len=4096 workload.batch_size=1 workload.activation_checkpointing=selective" \
            "model=llama3_2_1b workload.seq_len=2048 workload.batch_size=2 workload.activation_checkpointing=full"; do
  timeout 150 python benchmarks/train_kernels.py --calibration conf/calibrations/h200.yaml "$case hardware=h200" 2>&1 \
    | grep -v -i "warn\|INFO" | tee -a $OUT/train_kernels.txt
done
