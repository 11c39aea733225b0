#!/usr/bin/env bash
# issue 31, 2026-11-29 (eighteenth session), call 7 (one H200): the last code on the GPU: the CUDA-gated tests (the
# MoE's routing with a bool one-hot among them), and what a user sees: the MoE's compiled and eager training runs
# and the default run, each predicted with the shipped profile.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 200 python -m pytest -q -p no:cacheprovider -rs \
  "tests/metrics/test_timing.py::test_a_host_slower_than_the_hold_still_times_the_kernels_not_the_launches" \
  "tests/metrics/test_timing.py::test_a_graphed_call_is_timed_per_call_of_the_replayed_graph" \
  "tests/workloads/test_inference.py::test_decode_graph_replays_the_op_by_op_decode" \
  "tests/workloads/test_inference.py::test_prefill_graph_replays_the_launched_prefill_for_new_prompts_and_recaptures_a_new_shape" \
  tests/models/test_moe.py 2>&1 | grep -v -i "warn" | tail -4 | tee $OUT/gpu_tests.txt
R="hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db"
for run in "model=moe_2_5b workload.seq_len=2048 workload.batch_size=2 workload.compile=true" \
           "model=moe_2_5b workload.seq_len=2048 workload.batch_size=2" ""; do
  echo "== python -m parbench $R $run" >> $OUT/runs.log
  timeout 150 python -m parbench $R $run hydra.run.dir=/tmp/run 2>&1 | grep -v INFO | tail -32 >> $OUT/runs.log
  rm -rf /tmp/run
done
grep "==\|step_time_s \|predicted_step\|predicted_\*\|mfu " $OUT/runs.log
