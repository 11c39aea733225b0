#!/usr/bin/env bash
# Issue 31, 2026-12-07, call 2 on one H100. Call 1 measured the tiny model's 4-layer replayed prefill at 196 µs where the
# profile's calibration run measured 272. (a) The calibration's two tiny runs exactly as it makes them, twice each;
# (b) the calibration's native-engine runs of the host (infer_{4,8,16}_layers, infer_tiny_*, infer_graph_*) measured
# again, its other runs kept; (c) the list's 8 inference cases, for the profile (b) fits.
#   bash docs/results/2026-12-07_tiny31/call2.sh
source docs/results/device_env.sh H100
D=docs/results/2026-12-07_tiny31 CAL="hardware=h100_sxm tracking.uri=sqlite:////tmp/mlflow.db hardware.gpus_per_node=1"
for i in 1 2; do for L in 4 16; do
  timeout 60 python -m parbench $CAL workload=inference workload.input_len=128 workload.output_len=32 workload.batch_size=4 \
    workload.repeats=10 workload.profile=false workload.prefill_graph=true model=tiny model.layers=$L \
    hydra.run.dir=/tmp/c_${L}_$i > /tmp/c_${L}_$i.log 2>&1 \
    && python3 $D/collect.py /tmp/c_${L}_$i "{\"layers\": $L, \"input_len\": 128, \"batch\": 4, \"try\": $i}" >> $OUT/tiny_runs.jsonl
  tail -1 $OUT/tiny_runs.jsonl | cut -c1-160
done; done
W=outputs/calibrate/h100_sxm_infer31; mkdir -p $W
python3 -c "import json, re, sys; m = json.load(open(sys.argv[1])); json.dump({k: v for k, v in m.items() if not re.match(r'infer_(tiny_|graph_)?\d+_layers', k)}, open(sys.argv[2], 'w'))" \
  docs/results/2026-12-07_loop31/call1/measured_h100_sxm.json $W/measured.json
timeout 300 python -m parbench calibrate $CAL --work $W --out $OUT/h100_sxm.yaml 2>&1 | grep --line-buffered -v INFO \
  | grep --line-buffered -v "measured before" > $OUT/calibrate.log
cp $W/measured.json $OUT/measured_h100_sxm.json
grep -E "done in|saved|Error" $OUT/calibrate.log | tail -3 | cut -c1-200
J=$OUT/accuracy_infer_h100_sxm.jsonl
timeout 200 python benchmarks/predictor_accuracy.py measure --jsonl $J --cases infer --budget-s 190 hardware=h100_sxm > $OUT/measure.log 2>&1
python benchmarks/predictor_accuracy.py table --jsonl $J --calibration $OUT/h100_sxm.yaml | grep -E "^\| |^- "
