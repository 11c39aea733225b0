#!/usr/bin/env bash
# The seed write-ups' single-GPU tables, made by `parbench report` at the end of each sweep
# (docs/reports.md, "Regenerating the write-ups' tables on one GPU"). One H100 or H200.
#   bash benchmarks/report_tables.sh [latency] [ops] [micro] [train1b]     (default: all four)
# OVERRIDES="key=value ..." is added to every sweep (e.g. OVERRIDES=workload.decode_mode=eager).
# Each sweep's report folder is copied to docs/results/report-<name>/ and, with $OUT set (the
# device tool), packed as $OUT/report-<name>.tgz (unpack with: tar -xzf report-<name>.tgz -C docs/results).
set -uo pipefail
W=outputs/report_tables
mkdir -p "$W" docs/results
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
sweep() {  # sweep NAME OVERRIDES...: one Hydra multirun; its report goes to docs/results/report-NAME
  local name=$1; shift
  echo "== $name: python -m parbench -m $* ${OVERRIDES:-}" | tee -a "$W/commands.txt"
  # shellcheck disable=SC2086  # OVERRIDES: words on purpose
  python -m parbench -m "$@" ${OVERRIDES:-} hydra.sweep.dir="$W/$name" tracking.uri="sqlite:///$W/mlflow.db" \
    2>&1 | tee "$W/$name.log" | grep -v "^\[parbench\] step"
  rm -rf "docs/results/report-$name" && cp -r "$W/$name/report" "docs/results/report-$name"
  cp "$W/$name.log" "docs/results/report-$name/sweep.log"
  [ -n "${OUT:-}" ] && tar -czf "$OUT/report-$name.tgz" -C docs/results "report-$name"
}
# llama2_7b shape, native engine, one GPU (parallel=dp: inference runs tp*pp = 1 rank); max_seq_len past
# Llama 2's 4096 for the 4096 + 32 token requests.
INF=(workload=inference model=llama2_7b model.max_seq_len=8320 parallel=dp hardware.gpus_per_node=1 workload.output_len=32
     workload.warmup=1 workload.repeats=3 launch.timeout_s=300)
for s in ${@:-latency ops micro train1b}; do
  case $s in
    latency)  # (1) latency against input length x batch, with the fitted lines: 8 jobs
      sweep latency "${INF[@]}" workload.profile=false workload.input_len=128,1024,2048,4096 workload.batch_size=1,8 ;;
    ops)  # (2) prefill vs decode op shares (one profiled batch): 1 job
      sweep ops "${INF[@]}" workload.profile=true workload.input_len=1024 workload.batch_size=1 ;;
    micro)  # (3) matmul TFLOP/s against size with the bf16 peak; memory bandwidth against the spec: 2 jobs
      sweep micro workload=matmul,membw hardware.gpus_per_node=1 ;;
    train1b)  # (4) torchtitan's Llama 3.2 1B shape (untied head), dp on one GPU, eager and compiled, MFU: 2 jobs
      sweep train1b model=llama3_2_1b model.tie_embeddings=false parallel=dp hardware.gpus_per_node=1 \
        workload.seq_len=4096 workload.batch_size=2 workload.warmup_steps=5 workload.steps=20 workload.compile=false,true ;;
    *) echo "unknown table $s (latency, ops, micro, train1b)"; exit 2 ;;
  esac
done
