#!/usr/bin/env bash
# Prepared 2026-12-07, not yet run. Issue 31: the CUDA-gated tests, the new one among them (tests/workloads/
# test_host_transfer.py: reading a step does not wait for the work queued after it). About 60 s; any one GPU.
#   bash docs/results/2026-12-07_loop31/gpu_tests.sh H
source docs/results/device_env.sh $1
timeout 240 python -m pytest -q -p no:cacheprovider -rs tests/metrics/test_timing.py tests/workloads/test_host_transfer.py \
  "tests/workloads/test_inference.py::test_decode_graph_replays_the_op_by_op_decode" \
  "tests/workloads/test_inference.py::test_prefill_graph_replays_the_launched_prefill_for_new_prompts_and_recaptures_a_new_shape" \
  tests/models/test_moe.py tests/parallel/test_activation_checkpoint.py 2>&1 | grep -v -i "warn" | tail -6 | tee $OUT/gpu_tests.txt
