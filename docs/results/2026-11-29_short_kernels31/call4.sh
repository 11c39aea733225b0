#!/usr/bin/env bash
# issue 31, 2026-11-29 (sixteenth session), call 4 (one H200): the replayed prefill priced per kernel. `parbench calibrate`
# resumed from the last ledger (2026-11-29_replay31/call1) without its two infer_graph runs, so only those (which now
# count their prefill's kernels) and the new census runs (GPT-2 XL, Qwen3 1.7B, Llama 2 7B at 8 layers) are measured.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=outputs/calibrate/h200_census31; mkdir -p $W
python3 -c "import json, sys; d = json.load(open(sys.argv[1])); [d.pop(n) for n in ('infer_graph_4_layers', 'infer_graph_16_layers')]; json.dump(d, open(sys.argv[2], 'w'))" \
  docs/results/2026-11-29_replay31/call1/measured_h200.json $W/measured.json
timeout 420 python -m parbench calibrate hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db \
  --work $W --out $OUT/h200.yaml 2>&1 | grep -v INFO | tee $OUT/calibrate.log
cp $W/measured.json $OUT/measured_h200.json
