#!/usr/bin/env bash
# issue 31, 2026-11-29 (eighteenth session), call 4 (one H200): the MoE's routing prefix sums along each expert's row
# (call 3: the outer-dimension scan took 1.26 ms of a layer's 5.14 ms training step): the layer profiled again, the
# CUDA-gated tests, the MoE's cases measured again (the shipped profile), and the inference run a user makes.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 100 python docs/results/2026-11-29_models31/moe_profile.py > $OUT/moe_profile.txt 2>&1; grep "==" $OUT/moe_profile.txt
timeout 200 python -m pytest -q -p no:cacheprovider -rs \
  "tests/metrics/test_timing.py::test_a_host_slower_than_the_hold_still_times_the_kernels_not_the_launches" \
  "tests/metrics/test_timing.py::test_a_graphed_call_is_timed_per_call_of_the_replayed_graph" \
  "tests/workloads/test_inference.py::test_decode_graph_replays_the_op_by_op_decode" \
  "tests/workloads/test_inference.py::test_prefill_graph_replays_the_launched_prefill_for_new_prompts_and_recaptures_a_new_shape" \
  tests/models/test_moe.py 2>&1 | grep -v -i "warn" | tail -4 | tee $OUT/gpu_tests.txt
J=$OUT/accuracy_moe_h200.jsonl
grep -v moe_2_5b docs/results/2026-11-29_models31/call8/accuracy_moe_h200.jsonl > $J
timeout 220 python benchmarks/predictor_accuracy.py measure --jsonl $J --cases unseen_models,unseen_moe --budget-s 200 \
  hardware=h200 2>&1 | grep -v INFO | tail -30 > $OUT/measure.log
python benchmarks/predictor_accuracy.py table --jsonl $J --calibration conf/calibrations/h200.yaml \
  --out $OUT/accuracy_moe_h200.md > /dev/null 2>&1; grep "moe\|^- " $OUT/accuracy_moe_h200.md
timeout 120 python -m parbench workload=inference model=moe_2_5b hardware.gpus_per_node=1 workload.verify=true \
  tracking.uri=sqlite:////tmp/mlflow.db hydra.run.dir=/tmp/moe 2>&1 | grep -v INFO | tail -34 > $OUT/moe_inference.log
tail -22 $OUT/moe_inference.log
