#!/usr/bin/env bash
# the decode GEMMs at 1 and 32 rows beside the calibration's 8 (graph-replayed, as the calibration runs them)
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
S8=$(python -c "from parbench.calibration_runs import GPU_SIZES; print(GPU_SIZES['decode_matmul'])")
for rows in 8 1 32; do
  S=$(python -c "import json,sys; print(json.dumps([[$rows,k,n] for _,k,n in json.loads(sys.argv[1]) + [[0,1600,4800],[0,1600,1600],[0,1600,6400],[0,6400,1600]]]).replace(' ',''))" "$S8")
  python -m parbench workload=matmul "workload.shapes=$S" workload.b_transposed=true workload.graph_calls=40 workload.iters=20 \
    hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/m.db hydra.run.dir=/tmp/rows$rows 2>&1 | grep -v INFO | grep "matmul_time_us/\|rows\|Error\|error" > $OUT/rows$rows.txt
  python -c "import json; d=json.load(open('/tmp/rows$rows/results.json'))['metrics']; print({k:v for k,v in d.items() if k.startswith('matmul_time_us/')})" > $OUT/rows$rows.json
done
