#!/usr/bin/env bash
# 2026-11-28 (twelfth session): the tests that skip without CUDA (tests/metrics/test_timing.py: event timing under a
# hold, graphed calls; tests/workloads/test_inference.py: the engine's CUDA-graph decode and prefill), run on one GPU.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 400 python -m pytest -q -p no:cacheprovider -rs tests/metrics/test_timing.py tests/workloads/test_inference.py 2>&1 \
  | grep -v -i "warn" | tail -15 | tee $OUT/gpu_tests.txt
