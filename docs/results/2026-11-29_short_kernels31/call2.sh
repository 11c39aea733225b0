#!/usr/bin/env bash
# issue 31, 2026-11-29 (sixteenth session), call 2 (one H200): every prefill kernel of the 1B Llama, GPT-2 XL and Qwen3
# 1.7B at 1 x 512 (inference_kernels.py --top 60), then the short-prompt cases no list holds (predictor_accuracy.py
# --cases unseen_short), each appended to the jsonl as it ends.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
J=$OUT/accuracy_short_h200.jsonl
timeout 300 python benchmarks/predictor_accuracy.py measure --jsonl $J --cases unseen_short --budget-s 280 hardware=h200 \
  2>&1 | grep -v INFO | tail -20 | tee $OUT/measure.log
python benchmarks/predictor_accuracy.py table --jsonl $J --calibration conf/calibrations/h200.yaml \
  --out $OUT/accuracy_short_h200.md > /dev/null 2>&1; cat $OUT/accuracy_short_h200.md
for model in llama3_2_1b gpt2_xl qwen3_1_7b; do
  timeout 100 python benchmarks/inference_kernels.py --model $model --points 1x512 --top 60 --hardware h200 \
    --calibration conf/calibrations/h200.yaml 2>&1 | grep -v -i "warn\|INFO" >> $OUT/inference_kernels_all.txt
done
