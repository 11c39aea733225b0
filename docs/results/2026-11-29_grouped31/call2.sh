#!/usr/bin/env bash
# issue 31, 2026-11-29 (eighteenth session), call 2 (one H200): where the 2.5B MoE's training steps go with the
# refitted profile (kernels by kind and GEMM shapes beside the model's parts, compiled and eager), then its three
# training cases measured again and predicted with the shipped profile.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 250 python benchmarks/train_kernels.py --calibration conf/calibrations/h200.yaml \
  "hardware=h200 model=moe_2_5b workload.seq_len=2048 workload.batch_size=2 workload.compile=true" \
  "hardware=h200 model=moe_2_5b workload.seq_len=2048 workload.batch_size=2 workload.compile=false" \
  2>&1 | grep -v -i "warn\|INFO" | tail -80 > $OUT/train_kernels_moe.txt
grep "==\|kernels /\|idle\|GEMM ops" $OUT/train_kernels_moe.txt
J=$OUT/accuracy_moe_h200.jsonl
grep -v moe_2_5b docs/results/2026-11-29_models31/call8/accuracy_moe_h200.jsonl > $J
timeout 300 python benchmarks/predictor_accuracy.py measure --jsonl $J --cases unseen_models,unseen_moe --budget-s 280 \
  hardware=h200 2>&1 | grep -v INFO | tail -30 > $OUT/measure.log
python benchmarks/predictor_accuracy.py table --jsonl $J --calibration conf/calibrations/h200.yaml \
  --out $OUT/accuracy_moe_h200.md > /dev/null 2>&1; grep "moe\|^- " $OUT/accuracy_moe_h200.md
