#!/usr/bin/env bash
# Issue 31, 2026-12-07, call 5 on one H100 (a fresh host, not that of calls 1-4): what a new user sees with call 1's
# profile shipped and the launch-queue overlap rule, then the list's training cases, unseen_replay and unseen_moe.
#   bash docs/results/2026-12-07_loop31/call5.sh
source docs/results/device_env.sh H100
timeout 80 python -m parbench hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/u.db hydra.run.dir=/tmp/run 2>&1 | grep -v INFO | tail -22 > $OUT/default_run.log
timeout 100 python -m parbench workload=inference hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/u.db hydra.run.dir=/tmp/inf 2>&1 | grep -v INFO | tail -26 > $OUT/default_inference.log
grep -iE "step_time|ttft|tpot" $OUT/default_*.log | cut -c1-160
J=$OUT/accuracy_loop_h100_sxm.jsonl
timeout 420 python benchmarks/predictor_accuracy.py measure --jsonl $J --cases train,unseen_replay,unseen_moe \
  --budget-s 400 hardware=h100_sxm > $OUT/measure.log 2>&1
python benchmarks/predictor_accuracy.py table --jsonl $J | grep -E "^- |unsteady"
