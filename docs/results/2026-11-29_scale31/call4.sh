#!/usr/bin/env bash
# issue 31, 2026-11-29 (nineteenth session), call 4 (one H200): the unseen_scale cases call 3 could not run (the MoEs'
# inference; the device's copy of the profile then lacked the roofline's exponent), and a dense and an MoE decode
# step's kernels by kind (what an MoE's routing adds to a decode step).
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
bash docs/results/2026-11-29_scale31/measure.sh
export PYTHONPATH=/tmp/site:$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd benchmarks
for model in llama3_2_1b moe_2_5b; do
  timeout 120 python inference_kernels.py --model $model --points 1x512,16x512 --top 10 2>&1 | grep -v -i "warn\|INFO" > $OUT/inference_kernels_$model.txt
done
grep -h "==\|kernels/model\|kernels:" $OUT/inference_kernels_*.txt
