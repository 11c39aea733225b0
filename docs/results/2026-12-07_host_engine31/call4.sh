#!/usr/bin/env bash
# Issue 31, 2026-12-07 (the day's seventh session), call 4 (as run, same H100): unseen_replay and unseen_moe.
#   bash docs/results/2026-12-07_host_engine31/call4.sh
source docs/results/device_env.sh H; timeout 300 python benchmarks/predictor_accuracy.py measure --jsonl $OUT/unseen.jsonl --cases unseen_replay,unseen_moe --budget-s 280 hardware=h100_sxm > $OUT/measure.log 2>&1; python benchmarks/predictor_accuracy.py table --jsonl $OUT/unseen.jsonl | grep -E "^- |unsteady" | cut -c1-200
