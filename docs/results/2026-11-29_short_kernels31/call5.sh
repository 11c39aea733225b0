#!/usr/bin/env bash
# issue 31, 2026-11-29 (sixteenth session), call 5 (one H200): how much the calibration's replayed-prefill runs move
# from one process to the next on one host: the 1B Llama at 4 and 16 layers replaying its prefills (the runs
# infer_graph_4_layers and infer_graph_16_layers), twice each, as `parbench calibrate` runs them.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p /tmp/c5
for rep in 1 2; do
  for layers in 4 16; do
    D=/tmp/c5/graph$layers-$rep
    timeout 90 python -m parbench hardware=h200 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/mlflow.db resume=false \
      workload=inference workload.input_len=128 workload.output_len=32 workload.batch_size=4 workload.repeats=10 \
      workload.profile=false workload.prefill_graph=true model=llama3_2_1b model.layers=$layers hydra.run.dir=$D > $D.log 2>&1
    python3 -c "import json, sys; m = json.load(open(sys.argv[1]))['metrics']; print(sys.argv[2], 'ttft_ms %.4f p99 %.4f tpot_ms %.4f kernels %s' % (1e3 * m['ttft_s_p50'], 1e3 * m['ttft_s_p99'], 1e3 * m['tpot_s_p50'], m.get('prefill_kernels')))" \
      $D/results.json "layers $layers rep$rep" 2>&1 | tee -a $OUT/graph_runs.txt
  done
done
