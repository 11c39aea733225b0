#!/usr/bin/env bash
# Issue 31, 2026-12-07: whichever one-GPU machine comes. An H200: its list measured with the loop that no longer
# synchronises (loop31's measure.sh, records of an earlier call as $1). An H100: call1.sh here.
#   bash docs/results/2026-12-07_same_host31/any.sh [records of the call before]
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in
  *H200*) exec bash docs/results/2026-12-07_loop31/measure.sh H200 h200 $1;;
  *) exec bash docs/results/2026-12-07_same_host31/call1.sh;;
esac
