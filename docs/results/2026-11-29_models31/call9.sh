#!/usr/bin/env bash
# issue 31, 2026-11-29 (seventeenth session), call 9 (one H200): the tests that skip without CUDA at the session's last
# code (the 4 before today and the MoE's no-sync test), then the MoE's inference as a new user runs it.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 200 python -m pytest -q -p no:cacheprovider -rs \
  "tests/metrics/test_timing.py::test_a_host_slower_than_the_hold_still_times_the_kernels_not_the_launches" \
  "tests/metrics/test_timing.py::test_a_graphed_call_is_timed_per_call_of_the_replayed_graph" \
  "tests/workloads/test_inference.py::test_decode_graph_replays_the_op_by_op_decode" \
  "tests/workloads/test_inference.py::test_prefill_graph_replays_the_launched_prefill_for_new_prompts_and_recaptures_a_new_shape" \
  tests/models/test_moe.py 2>&1 | grep -v -i "warn" | tail -8 | tee $OUT/gpu_tests.txt
timeout 150 python -m parbench workload=inference model=moe_2_5b hardware.gpus_per_node=1 workload.verify=true \
  tracking.uri=sqlite:////tmp/mlflow.db hydra.run.dir=/tmp/moe 2>&1 | grep -v INFO | tail -34 > $OUT/moe_inference.log
tail -22 $OUT/moe_inference.log
