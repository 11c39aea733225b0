#!/usr/bin/env bash
# issue 31, 2026-11-29 (seventeenth session), call 2 (one H200): where the MoE's time goes. One MoE layer of moe_2_5b
# timed and profiled at decode, prefill and training sizes (moe_profile.py), then the MoE inference and training runs
# with their profiles on (op breakdowns in the job dirs).
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
D=docs/results/2026-11-29_models31
timeout 200 python $D/moe_profile.py > $OUT/moe_profile.txt 2>&1; grep "==" $OUT/moe_profile.txt
R="hardware=h200 hardware.gpus_per_node=1 parallel=dp model=moe_2_5b tracking.uri=sqlite:////tmp/mlflow.db"
timeout 150 python -m parbench $R workload=inference workload.batch_size=4 workload.input_len=512 workload.output_len=16 \
  workload.repeats=2 hydra.run.dir=$OUT/infer 2>&1 | grep -v INFO | tail -30 > $OUT/infer.log
timeout 200 python -m parbench $R workload=train workload.seq_len=2048 workload.batch_size=2 workload.steps=6 \
  hydra.run.dir=$OUT/train 2>&1 | grep -v INFO | tail -40 > $OUT/train.log
find $OUT -name "*.json.gz" -o -name "*trace*.json" | xargs rm -f
