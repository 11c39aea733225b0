#!/usr/bin/env bash
# Prepared 2026-12-07, not yet run. Issue 31: the eager and compiled training cases measured again with the loop that no
# longer synchronises the stream: the list's 15 (train), unseen_replay (6) and unseen_moe (3), about 10 min in all, so
# two calls; the second passes the first's records, and only the cases not in them are measured.
#   bash docs/results/2026-12-07_loop31/measure.sh H100 h100_sxm [records of the call before]
source docs/results/device_env.sh $1
J=$OUT/accuracy_loop_$2.jsonl
[ -n "$3" ] && cp $3 $J
B=${BUDGET_S:-560}  # less where the session's device time is short: the cases measured by then are kept
timeout $((B + 20)) python benchmarks/predictor_accuracy.py measure --jsonl $J --cases train,unseen_replay,unseen_moe \
  --budget-s $B hardware=$2 > $OUT/measure.log 2>&1
grep -E "^\\$|budget|Error|error:|Traceback" $OUT/measure.log | tail -8 | cut -c1-200
python benchmarks/predictor_accuracy.py table --jsonl $J | grep -E "^- |unsteady"
