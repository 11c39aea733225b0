#!/usr/bin/env bash
# Issue 31, 2026-12-07 (the day's seventh session), call 2 (as run, on the warm H100 of call 1): the list's 8 inference cases.
#   bash docs/results/2026-12-07_host_engine31/call2.sh
source docs/results/device_env.sh H; timeout 200 python benchmarks/predictor_accuracy.py measure --jsonl $OUT/infer.jsonl --cases infer --budget-s 180 hardware=h100_sxm > $OUT/measure.log 2>&1; python benchmarks/predictor_accuracy.py table --jsonl $OUT/infer.jsonl | grep -E "^- |^\|" | cut -c1-200
