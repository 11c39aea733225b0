#!/usr/bin/env bash
# issue 31, 2026-11-29 (nineteenth session), call 8 (one H200): the grouped roofline and the MoEs' inference on one
# host. H200s differ in a few-row grouped call's read (call 6: Mixtral's 2-row call 115 µs, call 7 on another host
# 100 µs, the same CUTLASS kernel): the grouped_matmul run measured again here (dropped from the ledger copy), then the
# MoE cases measured on this host into a record of their own, so the table can set this host's profile beside them.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=outputs/calibrate/h200_scale31h; mkdir -p $W
python3 -c "import json, sys; m = json.load(open(sys.argv[1])); m.pop('grouped_matmul'); json.dump(m, open(sys.argv[2], 'w'))" docs/results/2026-11-29_scale31/measured_h200.json $W/measured.json
timeout 200 python -m parbench calibrate hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db \
  --work $W --out $OUT/h200_host.yaml 2>&1 | grep -v INFO | grep "calibrate\]" | grep -v "measured before" > $OUT/calibrate.log
grep "grouped\|saved" $OUT/calibrate.log | cut -c1-250
python3 -c "import json, sys; m = json.load(open(sys.argv[1])); print(json.dumps({'grouped_matmul': m['grouped_matmul']}))" $W/measured.json > $OUT/grouped_matmul_run.json
timeout 330 python benchmarks/predictor_accuracy.py measure --jsonl $OUT/accuracy_moe_host_h200.jsonl --cases unseen_scale,unseen_models \
  --models mixtral_8x7b,moe_2_5b --budget-s 300 hardware=h200 > $OUT/measure.log 2>&1
grep -E "^\\$|budget|Error|error:|Traceback" $OUT/measure.log | tail -20
