#!/usr/bin/env bash
# issue 31, 2026-11-29 (twentieth session), mixtral31 call 6 (one H200, the host of calls 4-5, where a grouped call over
# fresh random matrices ran as fast as the engine's over its weights): the two grouped calibration runs measured again
# (dropped from a copy of the shipped ledger, the rest kept) and the roofline refitted; the matmul microbenchmark's
# graphed 2-row calls of Mixtral's shapes as the calibration runs them.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *1653724057812*) ;; *) echo "another host"; exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=outputs/calibrate/h200_mixtral31; mkdir -p $W
python3 -c "import json, sys; m = json.load(open(sys.argv[1])); json.dump({k: v for k, v in m.items() if k not in ('grouped_matmul', 'grouped_decode_matmul')}, open(sys.argv[2], 'w'))" \
  docs/results/2026-11-29_scale31/measured_h200.json $W/measured.json
timeout 240 python -m parbench calibrate hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db \
  --work $W --out $OUT/h200_grouped.yaml 2>&1 | grep -v INFO | grep "calibrate\]" | grep -v "measured before" > $OUT/calibrate.log
grep "grouped\|saved" $OUT/calibrate.log | cut -c1-300
python3 -c "import json, sys; m = json.load(open(sys.argv[1])); print(json.dumps({k: m[k] for k in ('grouped_matmul', 'grouped_decode_matmul')}))" $W/measured.json > $OUT/grouped_runs.json
R="hardware=h200 hardware.gpus_per_node=1 workload=matmul workload.dtype=bf16 tracking.uri=sqlite:////tmp/mlflow.db workload.iters=20 workload.routed_groups=true workload.groups=8 workload.graph_calls=40"
timeout 100 python -m parbench $R "workload.shapes=[[2,4096,14336],[2,14336,4096],[2,2048,8192]]" hydra.run.dir=/tmp/mm > /dev/null 2>&1
python3 -c "import json; m=json.load(open('/tmp/mm/results.json'))['metrics']; print(json.dumps({k: round(v, 1) for k, v in m.items() if k.startswith(('matmul_time_us/', 'matmul_groups_read/'))}))" | tee $OUT/microbench.txt
