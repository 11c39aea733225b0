#!/usr/bin/env bash
# issue 31, 2026-11-29 (seventeenth session), call 4 (one H200): the MoE with dropless routing held on the device,
# so its decode compiles and replays as a CUDA graph: the no-sync test, the tiny MoE's inference as a new user runs
# it, and the MoE's unseen cases measured again (inference now compiled; a compiled training step added).
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
D=docs/results/2026-11-29_models31
timeout 60 python -m pytest -q -p no:cacheprovider tests/models/test_moe.py 2>&1 | tail -3 > $OUT/gpu_tests.txt; cat $OUT/gpu_tests.txt
timeout 150 python -m parbench workload=inference model=tiny_moe hardware.gpus_per_node=1 workload.verify=true \
  tracking.uri=sqlite:////tmp/mlflow.db hydra.run.dir=/tmp/tiny_moe 2>&1 | grep -v INFO | tail -32 > $OUT/tiny_moe.log
J=$OUT/accuracy_moe_h200.jsonl
grep -v '"model=moe_2_5b", "workload.input_len' $D/call3/accuracy_moe_h200.jsonl > $J  # the MoE's inference runs again
timeout 380 python benchmarks/predictor_accuracy.py measure --jsonl $J --cases unseen_models,unseen_moe --budget-s 350 \
  hardware=h200 2>&1 | grep -v INFO | tail -80 > $OUT/measure.log
python benchmarks/predictor_accuracy.py table --jsonl $J --calibration conf/calibrations/h200.yaml \
  --out $OUT/accuracy_moe_h200.md > /dev/null 2>&1; cat $OUT/accuracy_moe_h200.md
