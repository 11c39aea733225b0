#!/usr/bin/env bash
# issue 31, 2026-11-28 (twelfth session), call 3: the H200 profile with the new long-prefill run (infer_long_prefill:
# the 1B Llama at 8 layers, 16 x 1024 prompts; its TTFT fits the prefill's element-wise factor), `parbench calibrate`
# resumed from the shipped profile's ledger (2026-11-28_h200_inference31: only the new run is measured), the recorded
# inference accuracy cases' table with it, then GPT-2 XL's and the 1B Llama's large prefills by kernel kind. H200 only.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
REC=docs/results/2026-11-28_h200_inference31 CASES=infer BUDGET_S=330 bash benchmarks/gpu_evidence.sh calib31 h200
P=outputs/gpu_evidence/calib31/h200.yaml
[ -e $P ] || exit 4
cp $P $OUT/h200.yaml
timeout 120 python benchmarks/inference_kernels.py --model gpt2_xl --points 32x512 --calibration $P 2>&1 | grep -v -i warn | tee $OUT/kernels_gpt2.txt
timeout 120 python benchmarks/inference_kernels.py --model llama3_2_1b --points 32x1024,2x4096 --calibration $P 2>&1 | grep -v -i warn | tee $OUT/kernels_llama.txt
