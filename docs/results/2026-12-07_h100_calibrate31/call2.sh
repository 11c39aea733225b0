#!/usr/bin/env bash
# issue 31, 2026-12-07, H100, call 2: with call 1's profile as the shipped conf/calibrations/h100_sxm.yaml, what a new
# user sees on the default training and inference runs, then cases no H100 had measured: the 2.5B MoE's training
# steps (unseen_moe), each dense family's eager checkpointed steps (unseen_replay), 7-8B and MoE inference (unseen_models).
source docs/results/device_env.sh H100
timeout 80 python -m parbench hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/u.db hydra.run.dir=/tmp/run 2>&1 | grep -v INFO | tail -22 > $OUT/default_run.log
timeout 100 python -m parbench workload=inference hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/u.db hydra.run.dir=/tmp/inf 2>&1 | grep -v INFO | tail -26 > $OUT/default_inference.log
grep -h "predicted_" $OUT/default_run.log $OUT/default_inference.log | cut -c1-160
timeout 390 python benchmarks/predictor_accuracy.py measure --jsonl $OUT/accuracy_unseen_h100_sxm.jsonl \
  --cases unseen_moe,unseen_replay,unseen_models --budget-s 370 hardware=h100_sxm > $OUT/measure.log 2>&1
grep -E "^\\$|budget|Error|error:|Traceback" $OUT/measure.log | tail -16 | cut -c1-200
