#!/usr/bin/env bash
# issue 31, 2026-11-29 (seventeenth session), call 8 (one H200): `parbench calibrate hardware=h200` resumed from the
# shipped profile's ledger, so only the new grouped_matmul run measures (a grouped GEMM's cost beyond a plain one's);
# the MoE's cases measured again with its counting-sort dispatch, predicted with that profile; its kernels at 4 x 512.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
D=docs/results/2026-11-29_models31
W=outputs/calibrate/h200_grouped31; mkdir -p $W; cp docs/results/2026-11-29_short_kernels31/measured_h200.json $W/measured.json
timeout 150 python -m parbench calibrate hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db \
  --work $W --out $OUT/h200.yaml 2>&1 | grep -v INFO | grep "calibrate\]" | head -3 > $OUT/calibrate.log; head -c 300 $OUT/calibrate.log
python3 -c "import json, sys; print(json.dumps(json.load(open(sys.argv[1]))['grouped_matmul'], indent=0))" $W/measured.json > $OUT/grouped_matmul.json
J=$OUT/accuracy_moe_h200.jsonl
grep -v moe_2_5b $D/call1/accuracy_models_h200.jsonl > $J
timeout 250 python benchmarks/predictor_accuracy.py measure --jsonl $J --cases unseen_models,unseen_moe --budget-s 230 \
  hardware=h200 2>&1 | grep -v INFO | tail -40 > $OUT/measure.log
python benchmarks/predictor_accuracy.py table --jsonl $J --calibration $OUT/h200.yaml \
  --out $OUT/accuracy_moe_h200.md > /dev/null 2>&1; grep moe $OUT/accuracy_moe_h200.md
timeout 100 python benchmarks/inference_kernels.py --model moe_2_5b --points 4x512 --top 25 --hardware h200 \
  --calibration $OUT/h200.yaml 2>&1 | grep -v -i "warn\|INFO" > $OUT/inference_kernels_moe.txt
grep "==\|kernels/model" $OUT/inference_kernels_moe.txt
