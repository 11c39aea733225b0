#!/usr/bin/env bash
# 2026-11-28 (twelfth session), call 3: where cp's and sp's step goes on two H200s (the accuracy cases the model misses
# most: cp -31 %, sp -23 %, against dp -8 %): the 1B Llama at seq 2048, batch 4, eager, profiled (profile.enabled=true:
# kernel time by kind, comm and exposed comm, idle, host dispatch), each run's metrics into $OUT/<name>.json. Two H200s only.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
[ "$(echo "$G" | grep -c H200)" -ge 2 ] || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
for p in cp dp sp; do
  timeout 150 python -m parbench hardware=h200 hardware.gpus_per_node=2 parallel=$p model=llama3_2_1b workload.seq_len=2048 \
    workload.batch_size=4 workload.steps=8 workload.warmup_steps=3 profile.plots=false hydra.run.dir=/tmp/run_$p \
    tracking.uri=sqlite:////tmp/mlflow.db 2>&1 | grep -v "INFO\|\] step" | tail -40 > $OUT/$p.log
  cp /tmp/run_$p/results.json $OUT/$p.json 2>/dev/null
done
