#!/usr/bin/env bash
# issue 31, 2026-11-29 (fourteenth session), call 1 (one H200): the element-wise kernels' rates.
# 1. `parbench calibrate` resumed from the shipped profile's ledger (2026-11-28_decode_grid31/call1): only the new
#    elementwise run (calibration_runs.GPU_SIZES) is measured; its ledger comes back.
# 2. The elementwise microbenchmark at the widths the calibration's grid lacks (GPT-2 XL's 1,600, FFN widths).
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=outputs/calibrate/h200_ew31; mkdir -p $W
cp docs/results/2026-11-28_decode_grid31/call1/measured_h200.json $W/measured.json
timeout 330 python -m parbench calibrate hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db \
  --work $W --out $OUT/h200.yaml 2>&1 | grep -v INFO | tee $OUT/calibrate.log
cp $W/measured.json $OUT/measured_h200.json
timeout 200 python -m parbench workload=elementwise hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db \
  'workload.widths=[1600,2560,5120,6144,6400,14336]' workload.iters=10 hydra.run.dir=$OUT/widths 2>&1 \
  | grep -v INFO | tee $OUT/widths.log
