#!/usr/bin/env bash
# Issue 31, 2026-12-07 (the day's seventh session), on an H100: `parbench calibrate --host`, which now also makes the
# native engine's small-batch runs, checked as a user would use it. The default inference run (tiny model) and the
# default training run with the shipped profile, then `--host` (the user's profile under PARBENCH_CACHE_DIR), then the
# same two runs again, reading that profile. About 8 min.
#   bash docs/results/2026-12-07_host_engine31/h100_host.sh
source docs/results/device_env.sh H100
export PARBENCH_CACHE_DIR=/tmp/cache
D=docs/results/2026-12-07_tiny31 GPU="hardware=h100_sxm hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/t.db"
both() {  # $1: which profile the runs read
  timeout 90 python -m parbench $GPU resume=false workload=inference hydra.run.dir=/tmp/i_$1 > /tmp/infer_$1.log 2>&1 \
    && python3 $D/collect.py /tmp/i_$1 "{\"profile\": \"$1\"}" >> $OUT/default.jsonl; tail -1 $OUT/default.jsonl | cut -c1-230
  timeout 90 python -m parbench $GPU resume=false hydra.run.dir=/tmp/t_$1 > $OUT/train_$1.log 2>&1
  grep -aE "step_time|predicted" $OUT/train_$1.log | tail -4 | cut -c1-200
}
both shipped
timeout 380 python -m parbench calibrate $GPU --host --work /tmp/hw 2>&1 | grep --line-buffered -v INFO \
  | grep --line-buffered -v "measured before" > $OUT/calibrate.log
cp /tmp/hw/measured.json $OUT/measured_host.json; cp $PARBENCH_CACHE_DIR/calibrations/h100_sxm.yaml $OUT/
grep -E "done in|saved|Error" $OUT/calibrate.log | tail -3 | cut -c1-200
both host
