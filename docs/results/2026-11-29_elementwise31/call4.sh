#!/usr/bin/env bash
# issue 31, 2026-11-29 (fourteenth session), call 4 (one H200): where the host's time goes in GPT-2 XL's eager fully
# checkpointed step (its host, 3.2 ms a layer, is the step) beside the 1B Llama's and GPT-2's unchecked step:
# each profiled (2 steps), its trace read on the machine by host_time.py (CUDA runtime calls and aten ops a step).
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
U=(hardware=h200 hardware.gpus_per_node=1 parallel=dp workload=train workload.steps=6 workload.warmup_steps=2 profile.enabled=true
   profile.plots=false profile.active_steps=2 tracking.uri=sqlite:////tmp/mlflow.db)
for case in "gpt2_full model=gpt2_xl workload.seq_len=1024 workload.batch_size=4 workload.activation_checkpointing=full" \
            "gpt2_none model=gpt2_xl workload.seq_len=1024 workload.batch_size=4" \
            "llama_full model=llama3_2_1b workload.seq_len=2048 workload.batch_size=2 workload.activation_checkpointing=full"; do
  set -- $case; name=$1; shift
  timeout 150 python -m parbench "${U[@]}" "$@" hydra.run.dir=/tmp/c4/$name 2>&1 | grep -v "INFO\|\] step" | tail -25 > $OUT/$name.log
  timeout 100 python docs/results/2026-11-29_elementwise31/host_time.py /tmp/c4/$name 2 2>&1 | tee -a $OUT/host_time.txt
done
