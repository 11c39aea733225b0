#!/usr/bin/env bash
# issue 31, 2026-11-28: the H200 profile's decode_matmul, prefill_matmul and attention runs and the engine runs that
# replay their prefills (the rest resumed from its ledger), then the inference cases' table; on an H100 nothing.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
REC=docs/results/2026-11-27_gpu31/h200_today ACC_FROM=docs/results/2026-11-27_device31/h200/accuracy_h200.jsonl \
  REDO="decode_matmul prefill_matmul attention" CASES=infer BUDGET_S=560 bash benchmarks/gpu_evidence.sh calib31 h200
