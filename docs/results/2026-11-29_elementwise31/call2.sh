#!/usr/bin/env bash
# issue 31, 2026-11-29 (fourteenth session), call 2 (one H200): the element-wise kernels by kind, measured as the models run
# them (the Llama's own RoPE in fp32, SwiGLU over two projections' outputs) at the widths the reading needs (powers of
# two and not), and the profile fitted with them.
# 1. `parbench calibrate` resumed from call 1's ledger: only the elementwise run (its command changed) is measured.
# 2. GPT-2 XL at 32 x 512 by kernel kind with that profile (benchmarks/inference_kernels.py).
# 3. The accuracy benchmark's unseen cases (shapes no fit or table has seen), measured into a jsonl until the budget.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
END=$((SECONDS + 570))
W=outputs/calibrate/h200_ew31; mkdir -p $W
cp docs/results/2026-11-29_elementwise31/call1/measured_h200.json $W/measured.json
timeout 240 python -m parbench calibrate hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db \
  --work $W --out $OUT/h200.yaml 2>&1 | grep -v INFO | tee $OUT/calibrate.log
cp $W/measured.json $OUT/measured_h200.json
[ -e $OUT/h200.yaml ] || exit 4
timeout 120 python benchmarks/inference_kernels.py --model gpt2_xl --points 32x512 --calibration $OUT/h200.yaml 2>&1 \
  | grep -v -i warn | tee $OUT/kernels_gpt2.txt
python benchmarks/predictor_accuracy.py measure --jsonl $OUT/accuracy_unseen_h200.jsonl --cases unseen_train,unseen_infer \
  --budget-s $((END - SECONDS)) hardware=h200
