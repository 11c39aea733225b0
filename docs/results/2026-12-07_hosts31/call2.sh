#!/usr/bin/env bash
# Issue 31, 2026-12-07. An H200: its list (loop31's measure.sh). An H100: does measuring the calibration's 14 host runs
# on this host, the shipped profile's other runs kept, put this host's eager checkpointed steps right? First the list's
# 13 eager checkpointed cases (the rest of call 1's records are kept, so not measured), then the host runs; the profile
# is refitted from the returned ledger afterwards (calibrate --fit-only), so a cut-off fit loses nothing.
#   bash docs/results/2026-12-07_hosts31/call2.sh
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in
  *H200*) exec bash docs/results/2026-12-07_loop31/measure.sh H200 h200;;
esac
source docs/results/device_env.sh H100
D=docs/results/2026-12-07_hosts31; J=$OUT/cases.jsonl
python3 -c "import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)['overrides']
    if 'workload.compile=false' not in o or 'workload.activation_checkpointing=none' in o: print(line, end='')" \
  $D/call1/accuracy_loop_h100_sxm.jsonl > $J
timeout 250 python benchmarks/predictor_accuracy.py measure --jsonl $J --cases train,unseen_replay,unseen_moe \
  --budget-s 230 hardware=h100_sxm > $OUT/measure.log 2>&1
grep -cE "^\\$" $OUT/measure.log
W=outputs/calibrate/host31; mkdir -p $W
python3 -c "import json, sys; m = json.load(open(sys.argv[1])); json.dump({k: v for k, v in m.items() if not k.startswith('host')}, open(sys.argv[2], 'w'))" \
  docs/results/2026-12-07_loop31/call1/measured_h100_sxm.json $W/measured.json
(while sleep 10; do cp $W/measured.json $OUT/measured_h100_sxm.json; done) > /dev/null 2>&1 &
COPIER=$!
timeout 300 python -m parbench calibrate hardware=h100_sxm tracking.uri=sqlite:////tmp/mlflow.db hardware.gpus_per_node=1 \
  --work $W --out $OUT/h100_sxm.yaml 2>&1 | grep --line-buffered -v INFO | grep --line-buffered -v "measured before" > $OUT/calibrate.log
kill $COPIER; cp $W/measured.json $OUT/measured_h100_sxm.json
grep -E "done in|saved|Error" $OUT/calibrate.log | tail -3 | cut -c1-300
