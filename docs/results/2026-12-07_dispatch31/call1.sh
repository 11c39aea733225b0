#!/usr/bin/env bash
# issue 31, 2026-12-07, one H200 (or H100: the GPU is recorded), call 1: three eager checkpointed training steps with
# the default profile window (3 traced steps), then dispatch_trace.py over their traces: whether the host's dispatch
# waits on the device. Qwen3 1.7B selective at 2 x 2048 (a replayed layer cost the host 10.7 ms on host31's host,
# 4.3 at 2 x 64), the same model at 2 x 64, and the worst unseen_replay case (GPT-2 XL 512 x 8, full).
source docs/results/device_env.sh H
D=docs/results/2026-12-07_dispatch31
run() {  # name, overrides...
  local name=$1; shift
  timeout 150 python -m parbench hardware.gpus_per_node=1 parallel=dp workload=train workload.steps=8 workload.warmup_steps=3 \
    profile.active_steps=3 tracking.uri=sqlite:////tmp/d.db hydra.run.dir=/tmp/$name "$@" 2>&1 | grep -v INFO | tail -24 > $OUT/$name.log
  grep -E "step_time_s|predicted_step" $OUT/$name.log | cut -c1-140
}
run qwen3_2048 model=qwen3_1_7b workload.seq_len=2048 workload.batch_size=2 workload.activation_checkpointing=selective
run qwen3_64 model=qwen3_1_7b workload.seq_len=64 workload.batch_size=2 workload.activation_checkpointing=selective
run gpt2_512 model=gpt2_xl workload.seq_len=512 workload.batch_size=8 workload.activation_checkpointing=full
python $D/dispatch_trace.py qwen3_2048=/tmp/qwen3_2048/profile/trace_rank0.json.gz qwen3_64=/tmp/qwen3_64/profile/trace_rank0.json.gz \
  gpt2_512=/tmp/gpt2_512/profile/trace_rank0.json.gz > $OUT/dispatch.json
python -c "import json; [print(k, s['wall_ms'], s['gpu_busy'], s['gpu_busy_by_third'], s['lag_us'], s['launch_call_us']) for k, v in json.load(open('$OUT/dispatch.json')).items() for s in v]"
find /tmp/qwen3_2048/profile -name "trace_rank0.json.gz" -size -15M -exec cp {} $OUT/trace_qwen3_2048.json.gz \;
