#!/usr/bin/env bash
# Issue 31, 2026-12-07, call 6 on one H100: the calibration's checkpointed host runs (2 x 64 tokens, host-bound) at more
# depths than its 4 layers, up to each model's own: does a replayed layer cost the host the same at every depth?
#   bash docs/results/2026-12-07_loop31/call6.sh
source docs/results/device_env.sh H100
run() {  # name, overrides...
  local name=$1; shift
  timeout 60 python -m parbench hardware=h100_sxm hardware.gpus_per_node=1 parallel=dp workload=train workload.seq_len=64 \
    workload.batch_size=2 workload.steps=60 profile.enabled=false tracking.uri=sqlite:////tmp/d.db hydra.run.dir=/tmp/$name "$@" > /dev/null 2>&1
  python3 -c "import json, sys; m = json.load(open('/tmp/$name/results.json'))['metrics']; print(json.dumps({'name': '$name', 'args': sys.argv[1:], **{k: m.get(k) for k in ('step_time_s', 'step_time_s_p10', 'step_time_s_p90', 'host_dispatch_s')}}))" "$@" | tee -a $OUT/depth.jsonl
}
for ac in selective full; do
  for l in 4 12 28; do run qwen3_${ac}_$l model=qwen3_1_7b model.layers=$l workload.activation_checkpointing=$ac; done
  for l in 4 16; do run llama_${ac}_$l model=llama3_2_1b model.layers=$l workload.activation_checkpointing=$ac; done
  for l in 4 16; do run gpt2_${ac}_$l model=gpt2_xl model.layers=$l workload.activation_checkpointing=$ac; done
done
for l in 4 28; do run qwen3_none_$l model=qwen3_1_7b model.layers=$l; done
