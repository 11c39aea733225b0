#!/usr/bin/env bash
# Issue 31, 2026-12-07: whichever one-GPU machine comes measures its list with the loop that no longer synchronises
# (loop31's measure.sh): an H200 the list its profile has not yet been checked against, an H100 its list on one more
# host. $1: the records of the call before on the same GPU, so that only the cases not in them are measured.
#   bash docs/results/2026-12-07_hosts31/any.sh [records of the call before]
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in
  *H200*) exec bash docs/results/2026-12-07_loop31/measure.sh H200 h200 $1;;
  *) exec bash docs/results/2026-12-07_loop31/measure.sh H100 h100_sxm $1;;
esac
