#!/usr/bin/env bash
# Issue 31, 2026-12-07, call 4 (as run): the list's 8 inference cases, going on from call 1's 5 records.
#   bash docs/results/2026-12-07_host_probe31/call4.sh <call 1's infer.jsonl>
source docs/results/device_env.sh H; cp $1 $OUT/infer.jsonl
timeout 200 python benchmarks/predictor_accuracy.py measure --jsonl $OUT/infer.jsonl --cases infer --budget-s 180 hardware=h100_sxm > $OUT/measure.log 2>&1
python benchmarks/predictor_accuracy.py table --jsonl $OUT/infer.jsonl | grep -E "^- |^\|" | cut -c1-200
