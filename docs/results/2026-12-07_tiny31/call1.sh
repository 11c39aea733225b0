#!/usr/bin/env bash
# Issue 31, 2026-12-07 (second session of the day), call 1. On an H200: the list measured with the loop that no longer
# synchronises (loop31's measure.sh). On an H100: the tiny model's replayed prefill taken apart: its kernels timed in
# graphs and by events (tiny_ops.py), the replay's kernels by kind (inference_kernels.py), and its TTFT at 2 to 16 layers, 64 and 128-token prompts, batch 1 and 4.
#   bash docs/results/2026-12-07_tiny31/call1.sh
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in *H200*) exec bash docs/results/2026-12-07_loop31/measure.sh H200 h200;; esac
source docs/results/device_env.sh H100
D=docs/results/2026-12-07_tiny31
timeout 100 python benchmarks/inference_kernels.py --model tiny --points 4x64,4x128,1x64 --output-len 16 --top 20 \
  --hardware h100_sxm > $OUT/kernels.txt 2>&1; tail -4 $OUT/kernels.txt
timeout 120 python $D/tiny_ops.py > $OUT/ops.jsonl 2> $OUT/ops.err; tail -3 $OUT/ops.err
for point in "2 64 4" "16 64 4" "4 128 4" "16 128 4" "2 128 4" "4 64 4" "2 64 1" "16 64 1"; do
  set -- $point
  timeout 90 python -m parbench workload=inference model=tiny model.layers=$1 workload.input_len=$2 workload.batch_size=$3 \
    hardware=h100_sxm hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/t.db hydra.run.dir=/tmp/g_$1_$2_$3 \
    > /tmp/g_$1_$2_$3.log 2>&1 && python3 $D/collect.py /tmp/g_$1_$2_$3 "{\"layers\": $1, \"input_len\": $2, \"batch\": $3}" >> $OUT/grid.jsonl
  tail -1 $OUT/grid.jsonl | cut -c1-220
done
