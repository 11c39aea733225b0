#!/usr/bin/env bash
# Issue 31, 2026-12-07, call 4 on one H100 (the host of calls 1-2), with call 1's profile: what a new user sees (the
# default training and inference runs), then the Qwen3 and GPT-2 XL cases of the list measured a second time, since
# their eager checkpointed steps were unsteady in call 2.
#   bash docs/results/2026-12-07_loop31/call4.sh
source docs/results/device_env.sh H100
timeout 80 python -m parbench hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/u.db hydra.run.dir=/tmp/run 2>&1 | grep -v INFO | tail -22 > $OUT/default_run.log
timeout 100 python -m parbench workload=inference hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/u.db hydra.run.dir=/tmp/inf 2>&1 | grep -v INFO | tail -26 > $OUT/default_inference.log
grep -iE "step_time|ttft|tpot" $OUT/default_*.log | cut -c1-160
J=$OUT/accuracy_repeat_h100_sxm.jsonl
timeout 400 python benchmarks/predictor_accuracy.py measure --jsonl $J --cases train,unseen_replay --models qwen3_1_7b,gpt2_xl \
  --budget-s 380 hardware=h100_sxm > $OUT/measure.log 2>&1
python benchmarks/predictor_accuracy.py table --jsonl $J | grep -E "^- |unsteady"
