#!/usr/bin/env bash
# issue 31, 2026-12-07, one H200, call 2: bisect2.py (a B made before and after Mixtral's build, in one process)
source docs/results/device_env.sh H200
cd benchmarks && PYTHONPATH=$PYTHONPATH:$PWD timeout 400 python3 ../docs/results/2026-12-07_mixtral31/bisect2.py 2>&1 | grep -v "Warn\|warn" | tee $OUT/bisect2.txt
