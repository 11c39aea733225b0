#!/usr/bin/env bash
# issue 31, 2026-11-29 (seventeenth session), call 3 (one H200): the MoE after its rewrite (one grouped GEMM per
# expert matrix, routing without a host sync). One layer timed and profiled (moe_profile.py), then the MoE's cases
# of unseen_models and unseen_moe measured again.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
D=docs/results/2026-11-29_models31
timeout 200 python $D/moe_profile.py > $OUT/moe_profile.txt 2>&1; grep "==" $OUT/moe_profile.txt
J=$OUT/accuracy_moe_h200.jsonl
grep -v moe_2_5b $D/call1/accuracy_models_h200.jsonl > $J  # the dense cases as call 1 measured them: only the MoE's run
timeout 330 python benchmarks/predictor_accuracy.py measure --jsonl $J --cases unseen_models,unseen_moe --budget-s 300 \
  hardware=h200 2>&1 | grep -v INFO | tail -80 > $OUT/measure.log
python benchmarks/predictor_accuracy.py table --jsonl $J --calibration conf/calibrations/h200.yaml \
  --out $OUT/accuracy_moe_h200.md > /dev/null 2>&1; cat $OUT/accuracy_moe_h200.md
