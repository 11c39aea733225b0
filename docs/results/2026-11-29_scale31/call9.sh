#!/usr/bin/env bash
# issue 31, 2026-11-29 (nineteenth session), call 9 (one H200): on one host, the engine's Mixtral decode kernels
# (engine_kernels.py: 2-row grouped calls in the engine and standalone) and the matmul microbenchmark's graphed
# 2-row calls of the same shapes, as the calibration times them: engine against microbenchmark without the host between.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
R="hardware=h200 hardware.gpus_per_node=1 workload=matmul workload.dtype=bf16 tracking.uri=sqlite:////tmp/mlflow.db workload.iters=20 workload.routed_groups=true workload.groups=8"
for timing in "workload.graph_calls=40" "workload.graph_calls=0"; do
  timeout 100 python -m parbench $R $timing "workload.shapes=[[2,4096,14336],[2,14336,4096],[2,2048,8192]]" hydra.run.dir=/tmp/mm > /dev/null 2>&1
  python -c "import json, sys; m=json.load(open('/tmp/mm/results.json'))['metrics']; print(sys.argv[1], json.dumps({k: round(v, 1) for k, v in m.items() if k.startswith('matmul_time_us/')}))" "$timing" | tee -a $OUT/microbench.txt
  rm -rf /tmp/mm
done
cp docs/results/2026-11-29_scale31/engine_kernels.py benchmarks/_ek.py
(cd benchmarks && timeout 300 python _ek.py 2>&1 | grep -v -i "warn\|INFO" > $OUT/engine_kernels.txt)
grep -v "^  " $OUT/engine_kernels.txt
