source docs/results/device_env.sh H
B="hardware.gpus_per_node=1 parallel=dp workload=train workload.steps=20 workload.warmup_steps=3 profile.enabled=false resume=false"
A="model=qwen3_1_7b workload.seq_len=2048 workload.batch_size=2 workload.activation_checkpointing=selective"
D="model=llama3_2_1b workload.seq_len=4096 workload.batch_size=2"
T="model=tiny"
for case in A D T A; do for v in old new; do
  src=$PWD/src; [ $v = old ] && src=$PWD/.old_src/src
  echo "== $case $v $(PYTHONPATH=/tmp/site:$src timeout 100 python -m parbench $B ${!case} tracking.uri=sqlite:////tmp/$v.db hydra.run.dir=/tmp/$case$v 2>&1 | grep -E '^  (step_time_s|step_time_s_p10|step_time_s_p90|host_dispatch_s|predicted_step_time_s) ' | awk '{print $1"="$2$3}' | tr '\n' ' ')"
done; done | tee $OUT/cmp.log
