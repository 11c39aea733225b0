#!/usr/bin/env bash
# issue 31, 2026-11-29 (seventeenth session), call 5 (one H200): where the grouped-GEMM MoE's time goes beside the
# model's parts: its replayed prefill and graphed decode by kernel (inference_kernels.py), its eager training step by
# kernel kind (train_kernels.py), and the compiled training step (unseen_moe's new case) with the selective one again.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
D=docs/results/2026-11-29_models31
timeout 150 python benchmarks/inference_kernels.py --model moe_2_5b --points 4x512,1x128 --top 45 --hardware h200 \
  --calibration conf/calibrations/h200.yaml 2>&1 | grep -v -i "warn\|INFO" > $OUT/inference_kernels_moe.txt
head -4 $OUT/inference_kernels_moe.txt
timeout 200 python benchmarks/train_kernels.py --calibration conf/calibrations/h200.yaml \
  "hardware=h200 model=moe_2_5b workload.seq_len=2048 workload.batch_size=2 workload.compile=false" 2>&1 \
  | grep -v -i "warn\|INFO" | tail -80 > $OUT/train_kernels_moe.txt
J=$OUT/accuracy_moe_h200.jsonl
cp $D/call4/accuracy_moe_h200.jsonl $J
timeout 200 python benchmarks/predictor_accuracy.py measure --jsonl $J --cases unseen_moe --budget-s 180 \
  hardware=h200 2>&1 | grep -v INFO | tail -60 > $OUT/measure.log
python benchmarks/predictor_accuracy.py table --jsonl $J --calibration conf/calibrations/h200.yaml \
  --out $OUT/accuracy_moe_h200.md > /dev/null 2>&1; cat $OUT/accuracy_moe_h200.md
