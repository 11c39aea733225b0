#!/usr/bin/env bash
# issue 31, 2026-11-29 (eighteenth session), call 11 (one H200): call 9 again with each routed grouped call cycling
# through 8 seeded router-like splits (one split's time depends on which shares are whole tiles: call 8 and call 9
# timed 102 and 82 µs for two splits of the MoE's 4096 x 2048 x 2816): the grouped_matmul run measured again (dropped
# from the ledger copy, whose args are unchanged), the MoE's shapes split so, and the MoE's prefill kernels.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=outputs/calibrate/h200_routed31b; mkdir -p $W; python3 -c "import json, sys; m = json.load(open(sys.argv[1])); m.pop('grouped_matmul'); json.dump(m, open(sys.argv[2], 'w'))" docs/results/2026-11-29_grouped31/measured_h200.json $W/measured.json
timeout 200 python -m parbench calibrate hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db \
  --work $W --out $OUT/h200.yaml 2>&1 | grep -v INFO | grep "calibrate\]" | grep -v "measured before" > $OUT/calibrate.log
grep "grouped_matmul\|saved" $OUT/calibrate.log | cut -c1-200
python3 -c "import json, sys; m = json.load(open(sys.argv[1])); print(json.dumps({'grouped_matmul': m['grouped_matmul']}, indent=0))" \
  $W/measured.json > $OUT/new_runs.json
R="hardware=h200 hardware.gpus_per_node=1 workload=matmul workload.dtype=bf16 tracking.uri=sqlite:////tmp/mlflow.db workload.iters=20 workload.routed_groups=true"
for run in "workload.groups=8 workload.shapes=[[512,2048,2816],[2048,2048,2816],[4096,2048,2816],[8192,2048,2816],[16384,2048,2816],[4096,2816,2048],[8192,2816,2048]]" \
           "workload.groups=16 workload.shapes=[[1024,2048,1408],[4096,2048,1408],[16384,2048,1408],[16384,1408,2048]]" \
           "workload.groups=64 workload.shapes=[[4096,2048,1408],[16384,2048,1408],[32768,2048,1408],[32768,1408,2048]]"; do
  echo "== $run" >> $OUT/matmul.txt
  timeout 100 python -m parbench $R $run hydra.run.dir=/tmp/mm > /dev/null 2>&1
  python -c "import json; m=json.load(open('/tmp/mm/results.json'))['metrics']; print({k.split('/')[1]: round(v, 2) for k, v in m.items() if k.startswith('matmul_time_us/')})" >> $OUT/matmul.txt
  rm -rf /tmp/mm
done
cat $OUT/matmul.txt
timeout 120 python benchmarks/inference_kernels.py --model moe_2_5b --points 4x512 --top 12 --hardware h200 \
  --calibration $OUT/h200.yaml 2>&1 | grep -v -i "warn\|INFO" > $OUT/inference_kernels_moe.txt
grep "==\|kernels/model" $OUT/inference_kernels_moe.txt
