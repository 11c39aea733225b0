#!/usr/bin/env bash
# issue 31, 2026-11-29 (seventeenth session), call 10 (one H200): call 9's MoE inference with verify counted 33 of 64
# tokens apart from recomputation; the same run decoded eagerly (no graph, no compile), to see whether the graphed
# step or bf16 routing near ties part them.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
for mode in eager graph; do
  timeout 90 python -m parbench workload=inference model=moe_2_5b hardware.gpus_per_node=1 workload.verify=true \
    workload.decode_mode=$mode workload.profile=false tracking.uri=sqlite:////tmp/mlflow.db hydra.run.dir=/tmp/moe_$mode \
    2>&1 | grep "FINISHED\|FAILED\|mismatched\|tpot_s_p50" | tee -a $OUT/verify.log
done
