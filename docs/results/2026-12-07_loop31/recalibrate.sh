#!/usr/bin/env bash
# Prepared 2026-12-07, not yet run. Issue 31: the calibration's training runs measured again with the loop that no
# longer synchronises the stream (docs/results/2026-12-07_dispatch31.md); its microbenchmarks and inference runs kept.
#   bash docs/results/2026-12-07_loop31/recalibrate.sh H100 h100_sxm docs/results/2026-12-07_h100_calibrate31/call1/measured_h100_sxm.json
#   bash docs/results/2026-12-07_loop31/recalibrate.sh H200 h200 docs/results/2026-11-29_scale31/measured_h200.json
# About 450 s (27 training runs). Then copy $OUT/<hw>.yaml to conf/calibrations/ and the ledger beside this script.
# A call cut short returns $OUT/measured_<hw>.json; RESUME=1 with that ledger as the third argument goes on from it.
source docs/results/device_env.sh $1
HW=$2; W=outputs/calibrate/${HW}_loop31; mkdir -p $W
python3 -c "import json, sys; m = json.load(open(sys.argv[1])); json.dump({k: v for k, v in m.items() if sys.argv[3] == '1' or 'workload=train' not in v['args']}, open(sys.argv[2], 'w'))" $3 $W/measured.json ${RESUME:-0}
(while sleep 10; do cp $W/measured.json $OUT/measured_$HW.json; done) > /dev/null 2>&1 &  # a call cut short keeps what finished
COPIER=$!
timeout ${CAL_S:-540} python -m parbench calibrate hardware=$HW tracking.uri=sqlite:////tmp/mlflow.db hardware.gpus_per_node=1 \
  --work $W --out $OUT/$HW.yaml 2>&1 | grep --line-buffered -v INFO | grep --line-buffered -v "measured before" > $OUT/calibrate.log
kill $COPIER; cp $W/measured.json $OUT/measured_$HW.json
grep -E "done in|saved|Error" $OUT/calibrate.log | tail -5 | cut -c1-300
