#!/usr/bin/env bash
# Issue 31, 2026-12-07 (the day's seventh session), call 3 (as run, same H100): the list's 15 training cases.
#   bash docs/results/2026-12-07_host_engine31/call3.sh
source docs/results/device_env.sh H; timeout 430 python benchmarks/predictor_accuracy.py measure --jsonl $OUT/train.jsonl --cases train --budget-s 410 hardware=h100_sxm > $OUT/measure.log 2>&1; python benchmarks/predictor_accuracy.py table --jsonl $OUT/train.jsonl | grep -E "^- |unsteady" | cut -c1-200
