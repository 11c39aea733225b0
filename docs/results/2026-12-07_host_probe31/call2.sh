#!/usr/bin/env bash
# Issue 31, 2026-12-07, call 2 (as run, on the warm H100 of call 1): the list's 13 eager checkpointed cases on this host,
# the rest of hosts31 call 1's records kept.
#   bash docs/results/2026-12-07_host_probe31/call2.sh
source docs/results/device_env.sh H; D=docs/results/2026-12-07_hosts31; J=$OUT/cases.jsonl
python3 -c "import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)['overrides']
    if 'workload.compile=false' not in o or 'workload.activation_checkpointing=none' in o: print(line, end='')" $D/call1/accuracy_loop_h100_sxm.jsonl > $J
timeout 300 python benchmarks/predictor_accuracy.py measure --jsonl $J --cases train,unseen_replay --budget-s 280 hardware=h100_sxm > $OUT/measure.log 2>&1
python benchmarks/predictor_accuracy.py table --jsonl $J | grep -E "^- |unsteady"
