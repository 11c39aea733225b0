#!/usr/bin/env bash
# Issue 31, 2026-12-07, call 3. On an H200: the list measured with the loop that no longer synchronises (loop31's
# measure.sh). On an H100: what an event pair adds to a timed call (events.py), and the calibration's tiny runs three
# times each on one host (call 1's host measured the 4-layer one at 196 µs, call 2's at 255, the profile's at 272); first
# the default inference run, as a new user sees it with the prefill GEMMs priced as replayed.
#   bash docs/results/2026-12-07_tiny31/call3.sh
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in *H200*) exec bash docs/results/2026-12-07_loop31/measure.sh H200 h200;; esac
source docs/results/device_env.sh H100
D=docs/results/2026-12-07_tiny31 CAL="hardware=h100_sxm tracking.uri=sqlite:////tmp/mlflow.db hardware.gpus_per_node=1"
timeout 100 python -m parbench workload=inference hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/u.db hydra.run.dir=/tmp/inf \
  2>&1 | grep -v INFO | tail -24 > $OUT/default_inference.log; grep -E "ttft" $OUT/default_inference.log
(cd $D && timeout 60 python events.py > $OUT/events.jsonl 2> $OUT/events.err); cat $OUT/events.jsonl | cut -c1-160
for i in 1 2 3; do for L in 4 16; do
  timeout 90 python -m parbench $CAL workload=inference workload.input_len=128 workload.output_len=32 workload.batch_size=4 \
    workload.repeats=10 workload.profile=false workload.prefill_graph=true model=tiny model.layers=$L \
    hydra.run.dir=/tmp/c_${L}_$i > /tmp/c_${L}_$i.log 2>&1 \
    && python3 $D/collect.py /tmp/c_${L}_$i "{\"layers\": $L, \"input_len\": 128, \"batch\": 4, \"try\": $i}" >> $OUT/tiny_runs.jsonl \
    || tail -5 /tmp/c_${L}_$i.log >> $OUT/failed.log
  tail -1 $OUT/tiny_runs.jsonl | cut -c1-120
done; done
