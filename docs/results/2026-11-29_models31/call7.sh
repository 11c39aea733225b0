#!/usr/bin/env bash
# issue 31, 2026-11-29 (seventeenth session), call 7 (one H200): grouped GEMMs at the 2.5B MoE's expert shapes (8
# experts of 2048 x 2816; workload=matmul workload.groups=8) beside plain GEMMs of the same FLOPs, timed alone and,
# at decode's rows, in graphs; then where Llama 2 7B's 1 x 512 prefill goes (its TTFT +10.5 % in call 1).
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
R="hardware=h200 hardware.gpus_per_node=1 workload=matmul workload.dtype=bf16 tracking.uri=sqlite:////tmp/mlflow.db"
BIG="[[512,2048,2816],[2048,2048,2816],[4096,2048,2816],[8192,2048,2816],[16384,2048,2816],[8192,2816,2048]]"
SMALL="[[8,2048,2816],[16,2048,2816],[64,2048,2816]]"
for run in "workload.groups=8 workload.shapes=$BIG" "workload.groups=0 workload.shapes=$BIG" \
           "workload.groups=8 workload.graph_calls=40 workload.shapes=$SMALL" "workload.groups=0 workload.graph_calls=40 workload.shapes=$SMALL"; do
  echo "== $run" >> $OUT/matmul.txt
  timeout 100 python -m parbench $R $run hydra.run.dir=/tmp/mm 2>&1 | grep "matmul_time_us\|matmul_tflops " >> $OUT/matmul.txt
  python -c "import json; m=json.load(open('/tmp/mm/results.json'))['metrics']; print({k.split('/')[1]: round(v, 2) for k, v in m.items() if k.startswith('matmul_time_us/')})" >> $OUT/matmul.txt
done
cat $OUT/matmul.txt | grep -v "matmul_time_us\|tflops "
timeout 150 python benchmarks/inference_kernels.py --model llama2_7b --points 1x512,4x512 --top 12 --hardware h200 \
  --calibration conf/calibrations/h200.yaml 2>&1 | grep -v -i "warn\|INFO" > $OUT/inference_kernels_llama2_7b.txt
grep "==\|kernels/model" $OUT/inference_kernels_llama2_7b.txt
