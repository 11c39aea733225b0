#!/usr/bin/env bash
# issue 31, 2026-11-29 (eighteenth session), call 10 (one H200, another host): the calibration's grouped_matmul run
# (routed splits) on another host, to see how far its fitted figures move between hosts (call 9's host: 686 TFLOP/s,
# half at 25.2 GFLOP, reads 2.7 TB/s). The second pass found the first FINISHED in the store and did not run (no
# resume=false): one pass came back.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
R="hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db workload=matmul workload.dtype=bf16 workload.groups=8 workload.routed_groups=true workload.iters=20"
S="workload.shapes=[[512,2048,8192],[2048,2048,8192],[4096,2048,8192],[8192,2048,8192],[8192,8192,2048],[16384,2048,8192],[4096,1024,4096],[8192,1024,4096],[8192,4096,1024]]"
for i in 1 2; do
  timeout 100 python -m parbench $R $S hydra.run.dir=/tmp/mm > /dev/null 2>&1
  python -c "
import json
from parbench.predict.microbench_fits import grouped_gemm_figures
m = json.load(open('/tmp/mm/results.json'))['metrics']
print({k.split('/')[1]: round(v, 1) for k, v in m.items() if k.startswith('matmul_time_us/')})
print(grouped_gemm_figures(m, 8, 2))" | tee -a $OUT/grouped_twice.txt
  rm -rf /tmp/mm
done
