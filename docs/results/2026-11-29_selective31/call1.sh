#!/usr/bin/env bash
# issue 31, 2026-11-29 (twentieth session), call 1 (one H200): the CUDA-gated tests; where the MoE's selective step's
# host time goes (host_replay.py: dispatch by phase, syncs, host ops), with its grouped GEMMs now saved by the policy;
# and the user's runs of that step and of the eager step without checkpointing, each against its prediction.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 200 python -m pytest -q -p no:cacheprovider -rs \
  "tests/metrics/test_timing.py::test_a_host_slower_than_the_hold_still_times_the_kernels_not_the_launches" \
  "tests/metrics/test_timing.py::test_a_graphed_call_is_timed_per_call_of_the_replayed_graph" \
  "tests/workloads/test_inference.py::test_decode_graph_replays_the_op_by_op_decode" \
  "tests/workloads/test_inference.py::test_prefill_graph_replays_the_launched_prefill_for_new_prompts_and_recaptures_a_new_shape" \
  tests/models/test_moe.py tests/parallel/test_activation_checkpoint.py 2>&1 | grep -v -i "warn" | tail -4 | tee $OUT/gpu_tests.txt
timeout 240 python docs/results/2026-11-29_selective31/host_replay.py $OUT moe_2_5b:none moe_2_5b:selective moe_2_5b:full \
  llama3_2_1b:selective 2>&1 | grep -v -i "warn\|USDT" | tee $OUT/host_replay.txt
R="hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db model=moe_2_5b"
for run in "workload.seq_len=1024 workload.batch_size=4 workload.activation_checkpointing=selective" \
           "workload.seq_len=2048 workload.batch_size=2"; do
  echo "== python -m parbench $R $run" >> $OUT/runs.log
  timeout 150 python -m parbench $R $run hydra.run.dir=/tmp/run 2>&1 | grep -v INFO | tail -32 >> $OUT/runs.log
  rm -rf /tmp/run
done
grep "==\|step_time_s \|host_dispatch\|predicted_step\|peak_mem\|predicted_peak" $OUT/runs.log
