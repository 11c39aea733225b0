#!/usr/bin/env bash
# Issue 31, 2026-12-07 (the day's eighth session), the first call on whichever one-GPU machine comes.
# An H200: the calibration's training runs with the new loop (loop31's call3.sh, about 540 s).
# An H100: the CUDA-gated tests on this session's commits (loop31's gpu_tests.sh, about 60 s), then the machine goes back.
#   bash docs/results/2026-12-07_h200_loop31/first.sh
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in
  *H200*) exec bash docs/results/2026-12-07_loop31/call3.sh;;
esac
exec bash docs/results/2026-12-07_loop31/gpu_tests.sh H
