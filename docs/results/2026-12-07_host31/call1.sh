#!/usr/bin/env bash
# issue 31, 2026-12-07 (twenty-first session), one H200, call 1: all fourteen host runs measured on one host, the four
# new checkpointed ones (Qwen3's and the MoE's blocks, selective and full) among them; the rest of the shipped ledger
# (2026-11-29_scale31) kept, its grouped_decode_matmul entry taken from mixtral31's call 6 (today's args, so kept).
# Then, on the same host, the checkpointed cases the host fit is for: the 2.5B MoE's (unseen_moe) and each dense
# family's eager checkpointed steps (unseen_replay).
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=outputs/calibrate/h200_host31; mkdir -p $W
python3 - docs/results/2026-11-29_scale31/measured_h200.json docs/results/2026-11-29_mixtral31/call6/grouped_runs.json $W/measured.json <<'PY'
import json, sys
ledger, grouped = (json.load(open(p)) for p in sys.argv[1:3])
kept = {k: v for k, v in ledger.items() if not k.startswith("host_")}
kept["grouped_decode_matmul"] = grouped["grouped_decode_matmul"]
json.dump(kept, open(sys.argv[3], "w"))
PY
timeout 300 python -m parbench calibrate hardware=h200 tracking.uri=sqlite:////tmp/mlflow.db hardware.gpus_per_node=1 \
  --work $W --out $OUT/h200_host.yaml 2>&1 | grep --line-buffered -v INFO | grep --line-buffered -v "measured before" > $OUT/calibrate.log
python3 -c "import json, sys; m = json.load(open(sys.argv[1])); print(json.dumps({k: v for k, v in m.items() if k.startswith('host_')}))" $W/measured.json > $OUT/host_runs.json
grep -E "done in|saved|Error" $OUT/calibrate.log | tail -3 | cut -c1-300
timeout 250 python benchmarks/predictor_accuracy.py measure --jsonl $OUT/accuracy_host_h200.jsonl --cases unseen_moe,unseen_replay \
  --budget-s 230 hardware=h200 > $OUT/measure.log 2>&1
grep -E "^\\$|budget|Error|error:|Traceback" $OUT/measure.log | tail -12 | cut -c1-200
