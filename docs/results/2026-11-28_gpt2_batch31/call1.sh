#!/usr/bin/env bash
# issue 31, 2026-11-28 (twelfth session), call 1: why GPT-2 XL at batch 32 x 512 is 11 % low in TTFT and TPOT on the H200
# with the shipped profile. (1) its prefill and decode kernels by kind beside the model's parts at batch 32, 24 and 16;
# (2) its block GEMMs (K = 1,600 or 6,400) against the 1B Llama's (K = 2,048 or 8,192) at prefill rows (4,096 and
# 16,384: above the profile's prefill table, where the model takes the rate curve of square GEMMs); (3) the same
# weights at 8 and 32 rows as graphed decode GEMMs (the profile's decode table is timed at 8 rows). H200 only.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
M=(hardware=h200 hardware.gpus_per_node=1 workload=matmul workload.b_transposed=true tracking.uri=sqlite:///$OUT/mlflow.db)
shapes() {  # shapes ROWS...: GPT-2 XL's block GEMMs and the 1B Llama's fused ones, [rows, in, out]
  local out=""; for r in "$@"; do for kn in 1600,4800 1600,1600 1600,6400 6400,1600 2048,3072 2048,2048 2048,16384 8192,2048; do
    out="$out[$r,$kn],"; done; done; echo "[${out%,}]"
}
timeout 150 python -m parbench "${M[@]}" "workload.shapes=$(shapes 4096 16384)" workload.iters=20 hydra.run.dir=$OUT/prefill_gemms \
  2>&1 | grep -v "^\[parbench\] step" | tee $OUT/prefill_gemms.txt
timeout 150 python -m parbench "${M[@]}" "workload.shapes=$(shapes 8 32)" workload.graph_calls=40 workload.iters=20 \
  hydra.run.dir=$OUT/decode_gemms 2>&1 | grep -v "^\[parbench\] step" | tee $OUT/decode_gemms.txt
timeout 240 python benchmarks/inference_kernels.py --model gpt2_xl --points 32x512,24x128,16x256 2>&1 | grep -v -i warn | tee $OUT/kernels_gpt2.txt
