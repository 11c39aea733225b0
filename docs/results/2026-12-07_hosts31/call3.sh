#!/usr/bin/env bash
# Issue 31, 2026-12-07, call 3. An H200: its list (loop31's measure.sh). An H100: the list's 8 inference cases on one
# more host (about 150 s), to set against the two hosts that measured them (2026-11-27, tiny31).
#   bash docs/results/2026-12-07_hosts31/call3.sh
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in
  *H200*) exec bash docs/results/2026-12-07_loop31/measure.sh H200 h200;;
esac
source docs/results/device_env.sh H100
timeout 200 python benchmarks/predictor_accuracy.py measure --jsonl $OUT/infer.jsonl --cases infer --budget-s 180 \
  hardware=h100_sxm > $OUT/measure.log 2>&1
python benchmarks/predictor_accuracy.py table --jsonl $OUT/infer.jsonl | grep -E "^- |^\|" | cut -c1-200
