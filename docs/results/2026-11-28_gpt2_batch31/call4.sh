#!/usr/bin/env bash
# issue 31, 2026-11-28 (twelfth session), call 4: the attention microbenchmark's decode calls (graphed, as the profile's
# table is timed) at the engine's own shapes: GPT-2 XL (25 heads, one query per KV head, 576 positions: 512 + 64) at
# batch 1 to 32, the 1B Llama at the calibration's 4 x 128 (160 positions) and at 32 x 1024 (1,088), beside the
# table's grid points around them (32 heads, 256 / 576 / 1,024 positions, 32 to 2,048 blocks). Compare with the
# engine's kernels in call1-3's kernels_*.txt. H200 only.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
S="[1,25,25,576,64],[4,25,25,576,64],[8,25,25,576,64],[16,25,25,576,64],[24,25,25,576,64],[32,25,25,576,64]"
S="$S,[1,32,32,256,64],[1,32,32,576,64],[1,32,32,1024,64],[16,32,32,256,64],[16,32,32,576,64],[16,32,32,1024,64]"
S="$S,[25,32,32,576,64],[32,32,32,256,64],[32,32,32,576,64],[32,32,32,1024,64],[64,32,32,256,64],[64,32,32,576,64],[64,32,32,1024,64]"
S="$S,[4,32,8,160,64],[4,32,8,256,64],[32,32,8,1088,64],[1,32,8,256,64],[64,32,8,256,64]"
timeout 200 python -m parbench hardware=h200 hardware.gpus_per_node=1 workload=attention "workload.shapes=[[1,32,8,512,64]]" \
  "workload.decode_shapes=[$S]" workload.iters=20 tracking.uri=sqlite:///$OUT/mlflow.db hydra.run.dir=$OUT/attention \
  2>&1 | grep -v "INFO" | tee $OUT/decode_attention.txt
