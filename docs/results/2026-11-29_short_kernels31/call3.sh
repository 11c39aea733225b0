#!/usr/bin/env bash
# issue 31, 2026-11-29 (sixteenth session), call 3 (one H200): the list's 8 inference cases measured again in fresh
# processes (a second record beside 2026-11-28_decode_grid31's), then the tests that skip without CUDA at this commit.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
J=$OUT/accuracy_infer_h200.jsonl
timeout 330 python benchmarks/predictor_accuracy.py measure --jsonl $J --cases infer --budget-s 300 hardware=h200 \
  2>&1 | grep -v INFO | grep "predicted_ttft\|^\\$" | tee $OUT/measure.log
timeout 220 python -m pytest -q -p no:cacheprovider -rs tests/metrics/test_timing.py tests/workloads/test_inference.py 2>&1 \
  | grep -v -i "warn" | tail -15 | tee $OUT/gpu_tests.txt
