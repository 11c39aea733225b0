#!/usr/bin/env bash
# issue 31, 2026-11-29 (nineteenth session), call 11 (one H200): the grouped runs split (calibration_runs.py): the
# compute-bound calls by their events (grouped_matmul, as grouped31's call 11 measured it: its args unchanged, kept
# from that ledger; graphed, 40 back-to-back 16,384-row calls ran 19 % slower, calls 5 and 8) and a decode step's few
# rows graphed (grouped_decode_matmul, measured here), resumed from the scale31 ledger.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=outputs/calibrate/h200_scale31i; mkdir -p $W
python3 -c "
import json, sys
m = json.load(open(sys.argv[1])); m['grouped_matmul'] = json.load(open(sys.argv[2]))['grouped_matmul']
json.dump(m, open(sys.argv[3], 'w'))" docs/results/2026-11-29_scale31/measured_h200.json docs/results/2026-11-29_grouped31/measured_h200.json $W/measured.json
timeout 200 python -m parbench calibrate hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db \
  --work $W --out $OUT/h200.yaml 2>&1 | grep -v INFO | grep "calibrate\]" | grep -v "measured before" > $OUT/calibrate.log
grep "grouped\|saved" $OUT/calibrate.log | cut -c1-250
cp $W/measured.json $OUT/measured_h200.json
