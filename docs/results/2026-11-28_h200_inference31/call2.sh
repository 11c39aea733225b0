#!/usr/bin/env bash
# issue 31, 2026-11-28: the new H200 profile (conf/calibrations/h200.yaml, from call 1: 2026-11-28_prefill_replay31/call_h200.sh) on cases no calibration
# run or accuracy case has: big31 (the default runs, 7-8B models at batch 1-32, GPT-2 XL at batch 32), then infer31's
# batches (its per-kernel breakdowns cut off by the call's limit); on an H100 nothing.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 330 bash benchmarks/gpu_evidence.sh big31
timeout 230 bash benchmarks/gpu_evidence.sh infer31
