#!/usr/bin/env bash
# issue 31, 2026-11-29 (nineteenth session), call 5 (one H200): grouped calls timed as CUDA graphs replay them
# (workload.graph_calls=40), beside call 3's timing of each call by its own events: the engine's decode ran Mixtral's
# 2-row grouped calls in 92 µs (call 2's profile) where call 3 timed 111-120 µs. The validation shapes again, graphed;
# then the calibration's grouped_matmul run graphed (its args now carry graph_calls=40 on sm90+), resumed from the
# scale31 ledger.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
R="hardware=h200 hardware.gpus_per_node=1 workload=matmul workload.dtype=bf16 tracking.uri=sqlite:////tmp/mlflow.db workload.iters=20 workload.routed_groups=true workload.groups=8 workload.graph_calls=40"
for shapes in "[[2,4096,14336],[8,4096,14336],[64,4096,14336],[512,4096,14336],[2048,4096,14336],[16384,4096,14336],[2,14336,4096],[2048,14336,4096]]" \
              "[[2,2048,2816],[8,2048,2816],[64,2048,2816],[1024,2048,2816],[4096,2048,2816],[2,2816,2048]]"; do
  timeout 100 python -m parbench $R "workload.shapes=$shapes" hydra.run.dir=/tmp/mm > /dev/null 2>&1
  python -c "import json; m=json.load(open('/tmp/mm/results.json'))['metrics']; print(json.dumps({k: v for k, v in m.items() if k.startswith(('matmul_time_us/', 'matmul_groups_read/'))}))" >> $OUT/validation_matmul_graphed.jsonl
  rm -rf /tmp/mm
done
cat $OUT/validation_matmul_graphed.jsonl | cut -c1-700
W=outputs/calibrate/h200_scale31g; mkdir -p $W; cp docs/results/2026-11-29_scale31/measured_h200.json $W/measured.json
timeout 200 python -m parbench calibrate hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db \
  --work $W --out $OUT/h200.yaml 2>&1 | grep -v INFO | grep "calibrate\]" | grep -v "measured before" > $OUT/calibrate.log
grep "grouped\|saved" $OUT/calibrate.log | cut -c1-250
cp $W/measured.json $OUT/measured_h200.json
