#!/usr/bin/env bash
# issue 31, 2026-11-29 (twentieth session), call 3 (one H200): the host runs measured again on one host, the new tiny
# MoE's (host_moe) among them (every host_* entry dropped from the ledger copy, the rest kept), the profile refitted;
# then on the same host the 2.5B MoE's training cases (unseen_moe: its selective step now saves the grouped GEMMs) and
# the user's first run on a GPU.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=outputs/calibrate/h200_selective31; mkdir -p $W
python3 -c "import json, sys; m = json.load(open(sys.argv[1])); json.dump({k: v for k, v in m.items() if not k.startswith('host_')}, open(sys.argv[2], 'w'))" \
  docs/results/2026-11-29_scale31/measured_h200.json $W/measured.json
timeout 330 python -m parbench calibrate hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db \
  --work $W --out $OUT/h200_host.yaml 2>&1 | grep -v INFO | grep "calibrate\]" | grep -v "measured before" > $OUT/calibrate.log
grep "host\|saved" $OUT/calibrate.log | cut -c1-400
python3 -c "import json, sys; m = json.load(open(sys.argv[1])); print(json.dumps({k: v for k, v in m.items() if k.startswith('host_')}))" $W/measured.json > $OUT/host_runs.json
timeout 200 python benchmarks/predictor_accuracy.py measure --jsonl $OUT/accuracy_moe_h200.jsonl --cases unseen_moe \
  --budget-s 180 hardware=h200 > $OUT/measure.log 2>&1
grep -E "^\\$|budget|Error|error:|Traceback" $OUT/measure.log | tail -8
timeout 60 python -m parbench hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db hydra.run.dir=/tmp/run 2>&1 | grep -v INFO | tail -20 > $OUT/default_run.log
grep "step_time_s \|predicted_step" $OUT/default_run.log
