#!/usr/bin/env bash
# GPU evidence for the microbenchmarks (2 GPUs): parbench beside the bare references, one session.
#   bash benchmarks/microbench_gpu.sh [destination of plots and tables, default docs/results/microbench]
set -uo pipefail  # keep going: a failed step is in its log
DEST=${1:-docs/results/microbench}
RUNS=outputs/microbench_gpu
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$DEST" "$RUNS"
bench() { local name=$1; shift; python -m parbench "$@" hydra.run.dir="$RUNS/$name" 2>&1 | tee "$RUNS/$name.log"; }

bench collectives workload=collectives workload.begin=1M workload.end=1G
torchrun --standalone --nproc-per-node=2 benchmarks/bare_allreduce.py --size-mib 1024 2>&1 | tee "$RUNS/bare_allreduce.log"
bench matmul workload=matmul workload.dtype=bf16 hardware.gpus_per_node=1
python benchmarks/bare_matmul.py --size 8192 --dtype bf16 2>&1 | tee "$RUNS/bare_matmul.log"
bench p2p workload=p2p
bench membw workload=membw hardware.gpus_per_node=1
bench tp_linear workload=tp_linear
bench topology workload=topology

for run in collectives matmul p2p membw tp_linear topology; do
  for f in "$RUNS/$run"/*.png "$RUNS/$run"/tp_linear.md "$RUNS/$run"/p2p.json "$RUNS/$run"/topology.*; do
    [ -e "$f" ] && cp "$f" "$DEST/"
  done
  cp "$RUNS/$run.log" "$DEST/$run.log"
done
cp "$RUNS"/bare_*.log "$DEST/"
echo "== parbench vs bare"
grep -h "busbw_gbps/all_reduce " "$RUNS/collectives.log" || true
grep -h "bare all_reduce" "$RUNS/bare_allreduce.log"
grep -h "matmul_tflops/8192x8192x8192" "$RUNS/matmul.log" || true
grep -h "bare torch.matmul" "$RUNS/bare_matmul.log"
