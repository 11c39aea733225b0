#!/usr/bin/env bash
# issue 31, short prompts: the prefill GEMMs of 64-1024 rows (graph-replayed) and the engine's kernels at 4 x 64
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
S=$(python -c "
import json
w = [(4096,12288),(4096,22016),(4096,4096),(11008,4096),(2048,3072),(2048,16384),(2048,2048),(8192,2048),(1600,4800),(1600,1600),(1600,6400),(6400,1600)]
print(json.dumps([[r,k,n] for r in (64,256,1024) for k,n in w]).replace(' ',''))")
python -m parbench workload=matmul "workload.shapes=$S" workload.b_transposed=true workload.graph_calls=40 workload.iters=20 \
  hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/m.db hydra.run.dir=/tmp/rowsP > $OUT/matmul.log 2>&1
python -c "import json; d=json.load(open('/tmp/rowsP/results.json'))['metrics']; print(json.dumps({k:v for k,v in d.items() if k.startswith('matmul_time_us/')}, indent=0))" > $OUT/prefill_gemms.json
tail -3 $OUT/prefill_gemms.json
cd benchmarks
timeout 200 python inference_kernels.py --model llama2_7b --points 4x64,16x64,4x256 > $OUT/kernels_7b.txt 2>&1; tail -5 $OUT/kernels_7b.txt
timeout 100 python inference_kernels.py --model tiny --points 4x64 > $OUT/kernels_tiny.txt 2>&1; tail -5 $OUT/kernels_tiny.txt
