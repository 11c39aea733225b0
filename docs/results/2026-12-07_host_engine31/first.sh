#!/usr/bin/env bash
# Issue 31, 2026-12-07 (the day's seventh session), the first call on whichever one-GPU machine comes.
# An H200: the calibration's training runs with the new loop (loop31's call3.sh, about 540 s).
# An H100: `calibrate --host` checked as a user would use it (h100_host.sh, about 8 min).
#   bash docs/results/2026-12-07_host_engine31/first.sh
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in
  *H200*) exec bash docs/results/2026-12-07_loop31/call3.sh;;
esac
exec bash docs/results/2026-12-07_host_engine31/h100_host.sh
