#!/usr/bin/env bash
# issue 31, 2026-11-28 (twelfth session), call 2: (1) decode GEMMs by rows (1 to 32) on the 1B Llama's fused weights,
# its head and GPT-2 XL's block weights, graphed as the engine runs them (the profile's decode table is timed at 8
# rows; the calibration's engine runs decode 4 sequences, GPT-2's off-list case 32); (2) the 1B Llama's and GPT-2 XL's
# prefill and decode kernels by kind beside the model's parts, at the calibration's batch (4 x 128), at batch 1 and at
# 32 (the local GPU's profile: benchmarks/inference_kernels.py's default, fixed after call 1 read the CPU's). H200 only.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
shapes() {  # shapes ROWS...: [rows, in, out] of the 1B Llama's fused GEMMs and head, and GPT-2 XL's block GEMMs
  local out=""; for r in "$@"; do for kn in 2048,3072 2048,2048 2048,16384 8192,2048 2048,128256 1600,4800 1600,1600 1600,6400 6400,1600; do
    out="$out[$r,$kn],"; done; done; echo "[${out%,}]"
}
timeout 200 python -m parbench hardware=h200 hardware.gpus_per_node=1 workload=matmul workload.b_transposed=true \
  "workload.shapes=$(shapes 1 2 4 8 16 32)" workload.graph_calls=40 workload.iters=20 tracking.uri=sqlite:///$OUT/mlflow.db \
  hydra.run.dir=$OUT/decode_gemms 2>&1 | grep -v "^\[parbench\] step" | tee $OUT/decode_gemms.txt
timeout 200 python benchmarks/inference_kernels.py --model llama3_2_1b --points 4x128,1x512,32x1024 2>&1 | grep -v -i warn | tee $OUT/kernels_llama.txt
timeout 150 python benchmarks/inference_kernels.py --model gpt2_xl --points 4x128,1x512 2>&1 | grep -v -i warn | tee $OUT/kernels_gpt2.txt
