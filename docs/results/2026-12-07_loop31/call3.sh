#!/usr/bin/env bash
# Issue 31, 2026-12-07, call 3 on one H200: the calibration's training runs with the new loop.
#   bash docs/results/2026-12-07_loop31/call3.sh
CAL_S=540 bash docs/results/2026-12-07_loop31/recalibrate.sh H200 h200 docs/results/2026-11-29_scale31/measured_h200.json
