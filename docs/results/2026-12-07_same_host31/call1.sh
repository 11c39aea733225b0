#!/usr/bin/env bash
# Issue 31, 2026-12-07, on one H100: does a profile's host figure measured on the same host put Qwen3's eager selective
# step (the list's worst case, +26 % on another host) right? The calibration's Qwen3 selective host run (4 layers,
# 2 x 64 tokens) three times and the list's 1 x 4096 case twice, on one host; then the tiny model's TTFT at 2 / 4 / 16
# layers and 64 / 128 tokens, each twice, as the calibration's tiny runs (resume=false: each one measured).
#   bash docs/results/2026-12-07_same_host31/call1.sh
source docs/results/device_env.sh H100
B="hardware=h100_sxm hardware.gpus_per_node=1 parallel=dp tracking.uri=sqlite:////tmp/d.db resume=false profile.enabled=false"
rec() {  # name, file: the run's metrics as one JSON line
  python3 -c "import json, sys; m = json.load(open('/tmp/$1/results.json'))['metrics']; print(json.dumps({'name': '$1', **{k: v for k, v in m.items() if k.startswith(('step_time', 'host_dispatch', 'ttft', 'tpot', 'predicted'))}}))" >> $OUT/$2 || echo "$1 failed" >> $OUT/$2
}
for i in 1 2 3; do
  timeout 60 python -m parbench $B workload=train workload.seq_len=64 workload.batch_size=2 workload.steps=60 model=qwen3_1_7b \
    model.layers=4 workload.activation_checkpointing=selective hydra.run.dir=/tmp/host_$i > /dev/null 2>&1; rec host_$i qwen3.jsonl
done
for i in 1 2; do
  timeout 90 python -m parbench $B workload=train workload.steps=8 workload.warmup_steps=3 model=qwen3_1_7b workload.seq_len=4096 \
    workload.batch_size=1 workload.compile=false workload.activation_checkpointing=selective hydra.run.dir=/tmp/case_$i > /dev/null 2>&1; rec case_$i qwen3.jsonl
done
cut -c1-220 $OUT/qwen3.jsonl
for i in 1 2; do for L in 2 4 16; do for N in 64 128; do
  timeout 60 python -m parbench $B workload=inference workload.input_len=$N workload.output_len=32 workload.batch_size=4 \
    workload.repeats=10 workload.profile=false model=tiny model.layers=$L hydra.run.dir=/tmp/t_${L}_${N}_$i > /dev/null 2>&1
  rec t_${L}_${N}_$i tiny.jsonl
done; done; done
cut -c1-160 $OUT/tiny.jsonl
