#!/usr/bin/env bash
# issue 31, 2026-11-29 (sixteenth session), call 1 (one H200): what a short prefill's kernels take beside the model.
# The replayed prefill's kernels by kind with their counts (benchmarks/inference_kernels.py) for the 1B Llama at the
# calibration's 4 x 128 and at 1 x 512, GPT-2 XL and Qwen3 1.7B at 1 x 512; then SDPA's forward at prefill-sized
# shapes (the calibration's attention shapes are 8-1,000x larger) and the element-wise kernels at 512-row calls.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p /tmp/c1
run() { timeout 120 python -m parbench hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db \
  resume=false "$@" 2>&1 | grep -v INFO; }
run workload=attention "workload.shapes=[[1,25,25,512,64],[1,25,25,128,64],[4,25,25,512,64],[32,25,25,512,64],[4,32,8,128,64],[1,32,8,512,64],[1,32,8,128,64],[8,32,8,512,64],[1,16,8,512,128],[4,16,8,512,128],[1,16,8,2048,128]]" \
  hydra.run.dir=/tmp/c1/attn > $OUT/attention_small.txt
run workload=elementwise workload.elements=1048576 "workload.widths=[1600,2048]" hydra.run.dir=/tmp/c1/ew > $OUT/elementwise_512rows.txt
run workload=elementwise workload.elements=262144 "workload.widths=[2048]" hydra.run.dir=/tmp/c1/ew2 > $OUT/elementwise_128rows.txt
for spec in "llama3_2_1b 4x128,1x512,1x128" "gpt2_xl 1x512,1x128" "qwen3_1_7b 1x512"; do
  set -- $spec
  timeout 150 python benchmarks/inference_kernels.py --model $1 --points $2 --hardware h200 --calibration conf/calibrations/h200.yaml \
    2>&1 | grep -v -i "warn\|INFO" | tee -a $OUT/inference_kernels.txt
done
