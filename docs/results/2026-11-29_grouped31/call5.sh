#!/usr/bin/env bash
# issue 31, 2026-11-29 (eighteenth session), call 5 (one H200): where the 2.5B MoE's training steps go after the
# routing scan's fix (call 4): kernels by kind beside the model's parts, compiled, eager and eager selective.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
M="hardware=h200 model=moe_2_5b"
timeout 400 python benchmarks/train_kernels.py --calibration conf/calibrations/h200.yaml \
  "$M workload.seq_len=2048 workload.batch_size=2 workload.compile=true" \
  "$M workload.seq_len=2048 workload.batch_size=2 workload.compile=false" \
  "$M workload.seq_len=1024 workload.batch_size=4 workload.compile=false workload.activation_checkpointing=selective" \
  2>&1 | grep -v -i "warn\|INFO" | tail -120 > $OUT/train_kernels_moe.txt
grep "==\|kernels /\|idle\|GEMM ops" $OUT/train_kernels_moe.txt
