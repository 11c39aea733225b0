#!/usr/bin/env bash
# Prepared 2026-12-07 and not yet run: no H100 could be started that session (six tries). Run as is: call 1, then call 2 with
# call 1's h100_sxm.yaml copied to conf/calibrations/ (and ledger + calibrate.log into this folder).
# issue 31, 2026-12-07 (twenty-first session), H100, call 1: `parbench calibrate hardware=h100_sxm` resumed from the
# 2026-11-28 H100 ledger (docs/results/2026-11-28_decode_attention31/h100_call2): every host_* run dropped so that all
# fourteen are measured on this one host, infer_graph_* dropped (they now count the replay's kernels); the runs added
# since (grouped, elementwise, census_*, the new checkpointed host runs) and the changed attention run are measured.
source docs/results/device_env.sh H100
W=outputs/calibrate/h100_sxm_c31; mkdir -p $W
python3 -c "import json, sys; m = json.load(open(sys.argv[1])); json.dump({k: v for k, v in m.items() if not k.startswith(('host_', 'infer_graph_'))}, open(sys.argv[2], 'w'))" \
  docs/results/2026-11-28_decode_attention31/h100_call2/measured_h100_sxm.json $W/measured.json
(while sleep 10; do cp $W/measured.json $OUT/measured_h100_sxm.json; done) > /dev/null 2>&1 &  # a call cut short keeps what finished
COPIER=$!
timeout ${CAL_S:-530} python -m parbench calibrate hardware=h100_sxm tracking.uri=sqlite:////tmp/mlflow.db hardware.gpus_per_node=1 \
  --work $W --out $OUT/h100_sxm.yaml 2>&1 | grep --line-buffered -v INFO | grep --line-buffered -v "measured before" > $OUT/calibrate.log
kill $COPIER; cp $W/measured.json $OUT/measured_h100_sxm.json
grep -E "done in|saved|Error" $OUT/calibrate.log | tail -5 | cut -c1-300
