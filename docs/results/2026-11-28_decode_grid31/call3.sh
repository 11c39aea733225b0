#!/usr/bin/env bash
# issue 31, 2026-11-28 (thirteenth session), call 3: the H200 profile with the decode attention table read in whole KV
# tiles and the engine's decode attention factor over it, fitted from the new large-batch engine run (infer_kv_cache: the
# 1B Llama at 8 layers, 32 x 1,024 prompts); `parbench calibrate` resumed from call 1's ledger (only that run is new),
# the recorded accuracy cases' table with it, then GPT-2 XL at large batches and the 1B Llama at 32 x 1,024 by kernel
# kind, and GPT-2 XL at 1 and 8 x 512 (where the table's surplus once hid its per-layer shortfall). H200 only.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
REC=docs/results/2026-11-28_decode_grid31/call1 CASES=infer BUDGET_S=300 bash benchmarks/gpu_evidence.sh calib31 h200
P=outputs/gpu_evidence/calib31/h200.yaml
[ -e $P ] || exit 4
cp $P $OUT/h200.yaml
timeout 170 python benchmarks/inference_kernels.py --model gpt2_xl --points 32x512,24x128,16x256,8x512,1x512 --calibration $P 2>&1 | grep -v -i warn | tee $OUT/kernels_gpt2.txt
timeout 90 python benchmarks/inference_kernels.py --model llama3_2_1b --points 32x1024,8x2048 --calibration $P 2>&1 | grep -v -i warn | tee $OUT/kernels_llama.txt
