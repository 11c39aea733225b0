#!/usr/bin/env bash
# Issue 31, 2026-12-07 (twenty-third session), call 1 on one H100: the CUDA-gated tests, then the calibration's
# training runs measured again with the loop that no longer synchronises the stream.
#   bash docs/results/2026-12-07_loop31/call1.sh
bash docs/results/2026-12-07_loop31/gpu_tests.sh H100 || exit
CAL_S=470 bash docs/results/2026-12-07_loop31/recalibrate.sh H100 h100_sxm \
  docs/results/2026-12-07_h100_calibrate31/call1/measured_h100_sxm.json
