#!/usr/bin/env bash
# issue 31, 2026-11-29 (fifteenth session), call 2 (one H200): what a checkpointed layer's replay costs the host, by
# family, without the model: each of the 1B Llama, Qwen3 1.7B and GPT-2 XL at 4 layers, 64 x 2 tokens, 60 steps (the
# calibration's host runs), without checkpointing and in each mode, twice; a replayed layer costs (host(mode) -
# host(none)) / 4. Then GPT-2 XL's prefill kernels at 1 x 512 and 4 x 512 beside the model's parts. (The first try
# lacked the mkdir: only inference_kernels.txt came back; the second ran the host runs alone: SKIP_KERNELS=1.)
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p /tmp/c2
for rep in 1 2; do
  for model in llama3_2_1b qwen3_1_7b gpt2_xl; do
    for ac in none full selective; do
      D=/tmp/c2/$model-$ac-$rep
      timeout 90 python -m parbench hardware=h200 hardware.gpus_per_node=1 parallel=dp workload=train model=$model \
        model.layers=4 workload.seq_len=64 workload.batch_size=2 workload.steps=60 profile.enabled=false \
        workload.activation_checkpointing=$ac tracking.uri=sqlite:////tmp/mlflow.db resume=false hydra.run.dir=$D > $D.log 2>&1
      python3 -c "import json, sys; m = json.load(open(sys.argv[1]))['metrics']; print(sys.argv[2], 'step_ms %.2f host_ms %.2f' % (1e3 * m['step_time_s'], 1e3 * m['host_dispatch_s']))" \
        $D/results.json "$model $ac rep$rep" 2>&1 | tee -a $OUT/host_runs.txt
    done
  done
done
[ -n "$SKIP_KERNELS" ] || timeout 150 python benchmarks/inference_kernels.py --model gpt2_xl --points 1x512,4x512 --hardware h200 --calibration conf/calibrations/h200.yaml \
  2>&1 | grep -v -i "warn\|INFO" | tee $OUT/inference_kernels.txt
