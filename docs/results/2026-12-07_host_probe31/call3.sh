#!/usr/bin/env bash
# Issue 31, 2026-12-07, call 3 (as run): the calibration's 14 host runs on this host, the shipped profile's other runs
# kept from loop31 call 1's ledger. The same runs today: `parbench calibrate hardware=h100_sxm hardware.gpus_per_node=1 --host`.
#   bash docs/results/2026-12-07_host_probe31/call3.sh
source docs/results/device_env.sh H; W=outputs/calibrate/host31; mkdir -p $W
python3 -c "import json, sys; m = json.load(open(sys.argv[1])); json.dump({k: v for k, v in m.items() if not k.startswith('host')}, open(sys.argv[2], 'w'))" docs/results/2026-12-07_loop31/call1/measured_h100_sxm.json $W/measured.json
(while sleep 10; do cp $W/measured.json $OUT/measured_h100_sxm.json; done) > /dev/null 2>&1 &
COPIER=$!
timeout 300 python -m parbench calibrate hardware=h100_sxm tracking.uri=sqlite:////tmp/mlflow.db hardware.gpus_per_node=1 --work $W --out $OUT/h100_sxm.yaml 2>&1 | grep --line-buffered -v INFO | grep --line-buffered -v "measured before" > $OUT/calibrate.log
kill $COPIER; cp $W/measured.json $OUT/measured_h100_sxm.json
grep -E "done in|saved|Error" $OUT/calibrate.log | tail -3 | cut -c1-300
