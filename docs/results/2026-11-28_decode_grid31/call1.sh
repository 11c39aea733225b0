#!/usr/bin/env bash
# issue 31, 2026-11-28 (thirteenth session), call 1: the H200 profile with the denser decode attention grid (4 kinds x
# 8 block counts x 5 lengths; calibration_runs.DECODE_ATTENTION_*), `parbench calibrate` resumed from the shipped
# profile's ledger (2026-11-28_h200_inference31: the attention run's command changed, so only it is measured again),
# the recorded inference accuracy cases' table with it, then GPT-2 XL at the batches it was 8-11 % low at, by kernel kind.
# H200 only.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
REC=docs/results/2026-11-28_h200_inference31 CASES=infer BUDGET_S=330 bash benchmarks/gpu_evidence.sh calib31 h200
P=outputs/gpu_evidence/calib31/h200.yaml
[ -e $P ] || exit 4
cp $P $OUT/h200.yaml
timeout 150 python benchmarks/inference_kernels.py --model gpt2_xl --points 32x512,24x128,16x256 --calibration $P 2>&1 | grep -v -i warn | tee $OUT/kernels_gpt2.txt
timeout 90 python benchmarks/inference_kernels.py --model llama3_2_1b --points 32x1024 --calibration $P 2>&1 | grep -v -i warn | tee $OUT/kernels_llama.txt
