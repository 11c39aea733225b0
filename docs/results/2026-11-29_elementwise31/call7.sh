#!/usr/bin/env bash
# issue 31, 2026-11-29 (fourteenth session), call 7 (one H200): the elementwise run again after review: add's and
# SwiGLU's second operands now rotate with their inputs (call 2 reused one 64 MiB tensor); `parbench calibrate` resumed
# from call 2's ledger without its elementwise run, so that only that run is measured.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=outputs/calibrate/h200_ew31; mkdir -p $W
python -c "import json, sys; d = json.load(open(sys.argv[1])); d.pop('elementwise'); json.dump(d, open(sys.argv[2], 'w'), indent=1)" \
  docs/results/2026-11-29_elementwise31/call2/measured_h200.json $W/measured.json
timeout 300 python -m parbench calibrate hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db \
  --work $W --out $OUT/h200.yaml 2>&1 | grep -v INFO | tee $OUT/calibrate.log
cp $W/measured.json $OUT/measured_h200.json
