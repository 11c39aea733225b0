#!/usr/bin/env bash
# The GPU evidence recorded under docs/results/, one suite per call:
#   bash benchmarks/gpu_evidence.sh SUITE [MODEL_OVERRIDES...]
# Suites: strategies | titan1b | titan8b | inference | inference1 | decode | correctness | micro |
# scaling | multi2 | record | record8b | window8b | oom | deepspeed | startup | reuse | families | calib31 | host31 | prefill31 | gpt2host31 | ops31 | hostac31 | unseen31 | infer31 | big31 | trainkernels31 | vllm
# (see each below; decode takes benchmarks/decode_mbu.py's options)
# Every run lands in outputs/gpu_evidence/<suite>/ (Hydra sweep dirs, mlflow.db, logs);
# with $OUT set (the device tool), the tables, plots and logs are packed into $OUT/<suite>.tgz.
set -uo pipefail
SUITE=$1; shift
W=outputs/gpu_evidence/$SUITE
mkdir -p "$W"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
pack() {  # with $OUT set (the device tool), the tables, plots and logs so far -> $OUT/<suite>.tgz
  [ -n "${OUT:-}" ] && tar -czf "$OUT/$SUITE.tgz" --exclude='*.json.gz' --exclude='trace_*.json' \
    --exclude='*.pickle' --exclude='hf_model' --exclude='compile_cache' -C "$W" .
}
sweep() {  # sweep NAME OVERRIDES...: one Hydra multirun, its log and summary.csv under $W
  local name=$1; shift
  echo "== $name: python -m parbench -m $*" | tee -a "$W/commands.txt"
  python -m parbench -m "$@" hydra.sweep.dir="$W/$name" tracking.uri="sqlite:///$W/mlflow.db" \
    2>&1 | tee "$W/$name.log" | grep -v "^\[parbench\] step"
  pack  # after every sweep: a call that runs out of time still returns what finished
}
agree() {  # agree NAME OVERRIDES...: benchmarks/vllm_agreement.py (one vLLM engine), its log and exit under $W
  local name=$1; shift
  echo "== $name: python benchmarks/vllm_agreement.py $W/$name $*" | tee -a "$W/commands.txt"
  python benchmarks/vllm_agreement.py "$W/$name" "$@" 2>&1 | tee "$W/$name.log" | grep -v "^\[parbench\] step"
  echo "$name exit ${PIPESTATUS[0]}" | tee -a "$W/$name.log"
  pack
}
timed() {  # timed NAME OVERRIDES...: a sweep, its wall time (Hydra start to exit) into wall_s.csv
  local t0; t0=$(date +%s.%N); sweep "$@"
  echo "$1,$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')" >> "$W/wall_s.csv"
}
record_summary() {  # what each run of the suite recorded, and what the profile window added (NAME vs NAME_noprofile)
  python - "$W" <<'PY' | tee "$W/record.txt"
import sys
import mlflow
import pandas as pd
root = sys.argv[1]
mlflow.set_tracking_uri(f"sqlite:///{root}/mlflow.db")
runs = mlflow.search_runs(search_all_experiments=True)
runs = runs[runs["tags.mlflow.parentRunId"].notna()]
walls = pd.read_csv(f"{root}/wall_s.csv").set_index("sweep")["wall_s"]
for _, run in runs.iterrows():
    sweep = run["tags.job_dir"].rstrip("/").split("/")[-2]
    get = lambda k: run.get(f"metrics.{k}", float("nan"))
    series = sorted(c.removeprefix("metrics.system/") for c in runs.columns
                    if c.startswith("metrics.system/gpu_0") and pd.notna(run[c]))
    print(f"{sweep}: {run['status']}, sweep wall {walls.get(sweep, float('nan')):.1f} s, torchrun {get('launch_duration_s'):.1f} s, "
          f"profile window added {get('profile_added_s'):.2f} s (export {get('profile_export_s'):.2f} s, "
          f"analysis {get('profile_analysis_s'):.2f} s)")
    print(f"  energy_j {get('energy_j'):.1f}  avg_power_w {get('avg_power_w'):.1f}  tokens_per_joule "
          f"{get('tokens_per_joule'):.1f}  throttled {run.get('tags.gpu_throttled')} "
          f"({run.get('tags.gpu_clock_event_reasons')})")
    print(f"  comm_pct {get('comm_pct'):.2f}  exposed_comm_pct {get('exposed_comm_pct'):.2f}  "
          f"prefill_comm_pct {get('prefill_comm_pct'):.2f}  decode_comm_pct {get('decode_comm_pct'):.2f}  "
          f"throughput {get('throughput_tokens_per_s'):.0f} tok/s  output {get('output_tokens_per_s'):.0f} tok/s")
    print(f"  system series: {', '.join(series) or 'none'}")
for name in walls.index:
    if f"{name}_noprofile" in walls.index:
        added, off = walls[name] - walls[f"{name}_noprofile"], walls[f"{name}_noprofile"]
        print(f"default profile window: {added:+.1f} s of wall time on {name} ({100 * added / off:+.1f} %)")
PY
}
seconds() {  # seconds LABEL COMMAND...: the command's wall time (its output dropped)
  local t0; t0=$(date +%s.%N); "${@:2}" >/dev/null 2>&1
  echo "$1: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s"
}
stamped() {  # stamped NAME OVERRIDES...: a sweep whose every console line carries its second since the start
  local name=$1; shift
  echo "== $name: python -m parbench -m $*" | tee -a "$W/commands.txt"
  python -m parbench -m "$@" hydra.sweep.dir="$W/$name" tracking.uri="sqlite:///$W/mlflow.db" 2>&1 \
    | python -u -c "import sys, time; t0 = time.time(); [print(f'{time.time() - t0:8.2f} {l}', end='', flush=True) for l in sys.stdin]" \
    | tee "$W/$name.log" | grep -v "\] step .*(warmup\|measure\|profile)"
  pack
}
profile_worker() {  # profile_worker JOB_DIR NAME: a finished job's worker run again in this process (one rank)
  # under cProfile: $W/NAME.txt lists the calls by cumulative time (imports, process group, model, steps).
  RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 \
    python - "$1" "$W/$2" <<'PY' 2>&1 | tail -3
import cProfile, pstats, sys, time
from pathlib import Path
start = time.perf_counter()
profile = cProfile.Profile()
profile.enable()
import parbench.worker as worker
worker.exit_now = lambda: None  # the profile is written after main returns
worker.main(Path(sys.argv[1]))
profile.disable()
with open(sys.argv[2] + ".txt", "w") as out:
    out.write(f"worker in one process: {time.perf_counter() - start:.2f} s\n")
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(70)
print(f"{sys.argv[2]}: worker in one process {time.perf_counter() - start:.2f} s")
PY
}
# Llama 3.2 1B shape with an untied head (1.50B), torchtitan's benchmark shape.
L1B=(model=llama3_2_1b model.tie_embeddings=false)
case $SUITE in
  strategies)  # 2 GPUs: every strategy on one 1.5B model (ep on a 2.5B MoE), profiled for comm %
    # DENSE / MOE narrow the layouts (MOE= skips the MoE sweep), e.g. DENSE=dp,fsdp,tp MOE= for issue 4's three.
    COMMON=(workload.seq_len=4096 workload.batch_size=4 workload.warmup_steps=3 workload.steps=14
            profile.active_steps=3 "$@")
    sweep dense "${L1B[@]}" parallel="${DENSE:-dp,fsdp,tp,sp,pp,cp}" "${COMMON[@]}"
    [ -n "${MOE-fsdp,ep}" ] && sweep moe model=moe_2_5b parallel="${MOE-fsdp,ep}" "${COMMON[@]}"
    ;;
  titan1b)  # 1 GPU: torchtitan's 1B comparison (seq 4096, batch 2, no AC), eager and compiled
    sweep titan1b "${L1B[@]}" hardware.gpus_per_node=1 workload.seq_len=4096 workload.batch_size=2 \
      workload.warmup_steps=5 workload.steps=20 workload.compile=false,true "$@"
    ;;
  titan8b)  # 2 GPUs: torchtitan's 8B FSDP comparison (seq 8192, batch 1/GPU, selective AC)
    sweep titan8b model=llama3_8b parallel=fsdp workload.seq_len=8192 workload.batch_size=1 \
      workload.activation_checkpointing=selective workload.warmup_steps=3 workload.steps=10 \
      workload.compile=false,true "$@"
    ;;
  inference|inference1)  # llama2_7b native engine: input-length sweep (batch 1), batch sweep (input 1024)
    # inference: 2+ GPUs, 1 GPU vs tp=2 vs pp=2 in each sweep (6 jobs per layout); inference1: 1 GPU only.
    # check: a tiny fp32 model first (seconds): KV-cache decode == recompute, and the same tokens in
    # every layout over NCCL. INPUTS / BATCHES / SWEEPS narrow the grid (e.g. SWEEPS=batch BATCHES=1,4,8,16,32).
    # Each job: ~13.5 GB bf16 weights; KV cache 0.5 MB/token/sequence (batch 32 x 1056 tokens: 17 GB).
    # LAYOUTS_OVERRIDE replaces the layouts, e.g. LAYOUTS_OVERRIDE="parallel=tp parallel.tp=1,2,4" on 4 GPUs;
    # TAG suffixes the sweep dirs (input_len_TAG ...) so such a call keeps the others' results.
    LAYOUTS=(parallel=dp,tp,pp); [ "$SUITE" = inference1 ] && LAYOUTS=(hardware.gpus_per_node=1)
    [ -n "${LAYOUTS_OVERRIDE:-}" ] && read -ra LAYOUTS <<< "$LAYOUTS_OVERRIDE"
    INF=(workload=inference model=llama2_7b model.max_seq_len=8320 workload.output_len=32 workload.warmup=1
         workload.repeats=3 workload.profile=false launch.timeout_s=600 "${LAYOUTS[@]}")
    for s in ${SWEEPS:-check input_len batch}; do
      case $s in
        check) sweep "check${TAG:+_$TAG}" workload=inference model=tiny workload.dtype=fp32 workload.verify=true \
                 workload.input_len=64 workload.output_len=16 workload.repeats=1 launch.timeout_s=120 "${LAYOUTS[@]}" "$@"
               python benchmarks/compare_tokens.py "$W/check${TAG:+_$TAG}" | tee "$W/check${TAG:+_$TAG}.txt" ;;
        input_len) sweep "input_len${TAG:+_$TAG}" "${INF[@]}" workload.input_len="${INPUTS:-128,1024,8192}" workload.batch_size=1 "$@" ;;
        batch) sweep "batch${TAG:+_$TAG}" "${INF[@]}" workload.input_len=1024 workload.batch_size="${BATCHES:-1,8,32}" "$@" ;;
      esac
    done
    ;;
  vllm)  # 1 GPU (issue 28): vLLM (0.26.0 with torch 2.11) with its own defaults (compiled, CUDA graphs) on
    # llama3_2_1b, dummy weights. agree7b, agree: parbench's TTFT/TPOT against vLLM's own LLM.generate
    # timings at the centre (in1024 bs16 out128) on one engine, AGREE_ROUNDS (10) interleaved rounds, on
    # llama2_7b (GPU-bound decode) and llama3_2_1b (host-bound); input_len, batch, output_len: the other
    # 2 points of each axis; native: parbench's engine on the input axis; tokens: vLLM with the seeded
    # weights at in256 against native's tokens; 7b: llama2_7b at the centre. SWEEPS narrows
    # (e.g. SWEEPS="agree7b agree", about 5 min on one H100).
    V1B=(workload=inference model=llama3_2_1b hardware.gpus_per_node=1 workload.repeats=5 launch.timeout_s=600)
    CENTRE=(workload.input_len=1024 workload.batch_size=16 workload.output_len=128)
    ROUNDS=(workload.repeats="${AGREE_ROUNDS:-10}" workload.warmup=1 workload.profile=false)
    for s in ${SWEEPS:-agree7b agree input_len batch output_len native tokens 7b}; do
      case $s in
        agree7b) agree agree7b model=llama2_7b hardware.gpus_per_node=1 "${CENTRE[@]}" "${ROUNDS[@]}" "$@" ;;
        agree) agree agree "${V1B[@]}" "${CENTRE[@]}" "${ROUNDS[@]}" "$@" ;;
        input_len|batch|output_len) NOPROF=("${V1B[@]}" workload.engine=vllm workload.profile=false "$@")
              case $s in  # GRID_* narrow an axis (e.g. GRID_BATCHES=64 to redo one point)
                input_len) sweep input_len "${NOPROF[@]}" workload.input_len="${GRID_INPUTS:-256,4096}" workload.batch_size=16 workload.output_len=128 ;;
                batch) sweep "batch${TAG:-}" "${NOPROF[@]}" workload.input_len=1024 workload.batch_size="${GRID_BATCHES:-4,64}" workload.output_len=128 ;;
                output_len) sweep output_len "${NOPROF[@]}" workload.input_len=1024 workload.batch_size=16 workload.output_len="${GRID_OUTPUTS:-32,512}" ;;
              esac ;;
        native) sweep native "${V1B[@]}" workload.engine=native workload.profile=false workload.input_len="${NATIVE_INPUTS:-256,1024,4096}" \
                  workload.batch_size=16 workload.output_len=128 "$@" ;;
        tokens) sweep tokens "${V1B[@]}" workload.engine=vllm workload.vllm.weights=seeded workload.profile=false \
                  workload.input_len=256 workload.batch_size=16 workload.output_len=128 "$@"
                python benchmarks/compare_tokens.py --against "$W/native/0" "$W/tokens/0" | tee "$W/tokens.txt"; pack ;;
        7b) sweep 7b workload=inference model=llama2_7b hardware.gpus_per_node=1 workload.engine=vllm workload.repeats=3 \
              launch.timeout_s=600 "${CENTRE[@]}" "$@" ;;
      esac
    done
    ;;
  decode)  # 1 GPU: llama2_7b decode TPOT/MBU per decode variant and batch (1/8/32/64), prefill MFU (~10 min)
    echo "== decode: python benchmarks/decode_mbu.py $*" | tee -a "$W/commands.txt"
    python benchmarks/decode_mbu.py --json "$W/decode_mbu.json" "$@" 2>&1 | tee "$W/decode_mbu.log" \
      | grep -v "^\[rank0\]:W"
    ;;
  correctness)  # 2 GPUs, fp32, tiny model: NCCL layouts reproduce the 1-GPU losses step by step
    # seq 128: torch's ring attention over the fp32 (memory-efficient) kernel needs chunks of 32+ positions.
    CHECK=(model=tiny model.tie_embeddings=false workload.dtype=fp32 workload.lr=0.02 workload.warmup_steps=1
           workload.steps=4 workload.batch_size=4 workload.seq_len=128)
    sweep reference "${CHECK[@]}" hardware.gpus_per_node=1 parallel=dp
    sweep layouts "${CHECK[@]}" parallel="${LAYOUTS:-tp,sp,cp,pp}" hardware.gpus_per_node=2 "$@"  # one batch per step, as the reference
    python - "$W" <<'PY' | tee "$W/correctness.txt"
import json, sys
from pathlib import Path
losses = lambda d: [json.loads(l)["loss"] for l in (d / "steps.jsonl").read_text().splitlines()]
root = Path(sys.argv[1]); ref = losses(root / "reference" / "0")
for job in sorted((root / "layouts").glob("[0-9]*"), key=lambda p: int(p.name)):
    name = (job / ".hydra" / "overrides.yaml").read_text().split("parallel=")[1].split()[0]
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses(job), ref))
    print(f"{name:6s} max relative loss difference vs 1 GPU over {len(ref)} steps: {worst:.2e}")
PY
    ;;
  deepspeed)  # 2 GPUs: FSDP2 vs DeepSpeed ZeRO-2/3 on the 1.5B model, profiled for comm %; ZeRO-3 with
    # CPU offload (unprofiled); DeepSpeed's flops profiler against parbench's FLOPs on 1 GPU.
    # DeepSpeed from the wheelhouse that benchmarks/ds_wheelhouse.sh fills (no internet here).
    python -c "import deepspeed" 2>/dev/null || pip install -q --no-index --find-links .whl deepspeed
    python -c "import deepspeed; print('deepspeed', deepspeed.__version__)" | tee -a "$W/commands.txt"
    COMMON=(workload.seq_len=4096 workload.batch_size=2 workload.warmup_steps=3 workload.steps=14
            profile.active_steps=3 "$@")
    for s in ${SWEEPS:-zero offload flops}; do  # SWEEPS narrows, e.g. SWEEPS=zero
      case $s in
        zero) sweep zero "${L1B[@]}" parallel=fsdp,zero2,zero3 "${COMMON[@]}" ;;
        offload) sweep offload "${L1B[@]}" parallel=zero3_offload workload.seq_len=4096 workload.batch_size=2 \
                   workload.warmup_steps=2 workload.steps=5 profile.enabled=false "$@" ;;
        flops) sweep flops "${L1B[@]}" workload=flops_check hardware.gpus_per_node=1 workload.seq_len=4096 \
                 workload.batch_size=2 "$@" ;;
      esac
    done
    ;;
  micro)  # 2 GPUs: collectives, p2p, membw, matmul, tp_linear beside bare torch references
    bash benchmarks/microbench_gpu.sh "$W/results" 2>&1 | tee "$W/micro.log" | tail -20
    ;;
  scaling)  # 4+ GPUs (issue 7): collectives; Llama 3 8B fsdp weak and strong scaling; tp and pp degrees
    N=$(nvidia-smi -L | wc -l)
    sweep collectives workload=collectives workload.begin=1M workload.end=4G workload.iters=10 \
      hardware.gpus_per_node=$N "$@"
    S8B=(model=llama3_8b workload.seq_len=4096 workload.activation_checkpointing=selective
         workload.warmup_steps=3 workload.steps=7 "$@")  # profiled by default (1 + 2 steps after the 7)
    GPUS=1; for ((g = 2; g <= N; g *= 2)); do GPUS+=",$g"; done  # 1,2,4[,8]
    sweep fsdp_weak "${S8B[@]}" parallel=fsdp workload.batch_size=2 hardware.gpus_per_node=$GPUS
    # Strong scaling: the global batch of the largest weak point (its run) on fewer GPUs; 1 GPU cannot hold it.
    STRONG=${GPUS#1,}; STRONG=${STRONG%,$N}
    sweep fsdp_strong "${S8B[@]}" parallel=fsdp workload.global_batch_size=$((2 * N)) hardware.gpus_per_node=$STRONG
    # Same global batch on all N GPUs, tp or pp degree varied, fsdp over what is left.
    LAYOUT=("${S8B[@]}" workload.global_batch_size=$((2 * N)) hardware.gpus_per_node=$N)
    sweep tp "${LAYOUT[@]}" parallel=fsdp_tp parallel.tp=2,$N
    sweep pp "${LAYOUT[@]}" parallel=pp_fsdp parallel.pp=2,$N
    ;;
  multi2)  # 2 GPUs (issue 32, runs 3 and 4), most wanted first: the all_reduce alpha-beta fit; 1 vs 2 GPU
    # training of the 1B model over dp/fsdp/tp/pp (speedup, efficiency, comm %; per-point wall time); native
    # inference of the 1B model on 1 GPU against tp=2 and pp=2 (eager decode: no compile per point); GPT2-XL
    # training on 1 vs 2 GPUs (its 25 heads admit no tp=2; pp needs its head untied from the embedding).
    echo "sweep,wall_s" > "$W/wall_s.csv"
    timed allreduce workload=collectives "workload.ops=[all_reduce]" workload.begin=1M workload.end=1G \
      hardware.gpus_per_node=2 "$@"
    T1B=("${L1B[@]}" workload.seq_len=2048 workload.batch_size=4 workload.warmup_steps=3 workload.steps=10 "$@")
    timed train1b_1gpu "${T1B[@]}" parallel=fsdp hardware.gpus_per_node=1
    timed train1b_2gpu "${T1B[@]}" parallel=dp,fsdp,tp,pp hardware.gpus_per_node=2
    timed infer1b "${L1B[@]}" workload=inference workload.decode_mode=eager workload.input_len=1024 \
      workload.batch_size=1,8 workload.output_len=32 workload.repeats=3 hardware.gpus_per_node=2 \
      parallel=dp,tp,pp "$@"
    TXL=(model=gpt2_xl model.tie_embeddings=false workload.seq_len=1024 workload.batch_size=4 workload.warmup_steps=3
         workload.steps=10 "$@")
    timed gpt2xl_1gpu "${TXL[@]}" parallel=fsdp hardware.gpus_per_node=1
    timed gpt2xl_2gpu "${TXL[@]}" parallel=dp,fsdp,pp hardware.gpus_per_node=2
    pack
    ;;
  record8b)  # 2 GPUs (issues 15 and 23): Llama 3 8B FSDP with every default (comm %, per-collective shares,
    # energy, system metrics; no profile override), then with profile.enabled=false: what the window adds.
    echo "sweep,wall_s" > "$W/wall_s.csv"
    R8B=(model=llama3_8b parallel=fsdp hardware.gpus_per_node=2 workload.seq_len=4096 workload.batch_size=1
         workload.activation_checkpointing=selective workload.warmup_steps=2 workload.steps=6)
    for run in default noprofile; do
      extra=(); [ "$run" = noprofile ] && extra=(profile.enabled=false)
      t0=$(date +%s.%N); sweep "fsdp8b_$run" "${R8B[@]}" "${extra[@]}" "$@"
      echo "fsdp8b_$run,$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')" >> "$W/wall_s.csv"
    done
    pack
    ;;
  record)  # 1 GPU (issue 15): what every run records by default, no profile override: comm %, energy_j,
    # tokens_per_joule, throttling, the system/* GPU series; a 1B training run, the same with
    # profile.enabled=false (what the default profile window adds to wall time), a llama2_7b native inference run.
    echo "sweep,wall_s" > "$W/wall_s.csv"
    R1B=("${L1B[@]}" hardware.gpus_per_node=1 workload.seq_len=4096 workload.batch_size=2)
    timed train_1b "${R1B[@]}" "$@"
    timed train_1b_noprofile "${R1B[@]}" profile.enabled=false "$@"
    timed infer_7b workload=inference model=llama2_7b hardware.gpus_per_node=1 workload.input_len=512 \
      workload.output_len=128 workload.batch_size=8 "$@"
    record_summary
    ;;
  window8b)  # 1 H200 (issue 15): Llama 3 8B with the default steps and profile window, then without
    # the window: what it adds to a default-length 8B run's wall time (full AC so it fits one GPU).
    # A tiny run first, so neither timed run pays a fresh machine's first-use costs (font cache, imports).
    sweep warm_caches model=tiny hardware.gpus_per_node=1 workload.steps=2 "$@"
    echo "sweep,wall_s" > "$W/wall_s.csv"
    R8B=(model=llama3_8b hardware.gpus_per_node=1 workload.seq_len=2048 workload.batch_size=1
         workload.activation_checkpointing=full)
    timed train_8b "${R8B[@]}" "$@"
    timed train_8b_noprofile "${R8B[@]}" profile.enabled=false "$@"
    record_summary
    ;;
  oom)  # 1 GPU (issue 19): a 1B run that cannot fit (seq 8192 x batch 64, no AC) fails as CUDA out of
    # memory, with the plan's estimate beside the device's capacity in the failure reason.
    sweep oom "${L1B[@]}" hardware.gpus_per_node=1 workload.seq_len=8192 workload.batch_size=64 profile.enabled=false "$@"
    python - "$W" <<'PY' | tee "$W/oom.txt"
import sys
import mlflow
mlflow.set_tracking_uri(f"sqlite:///{sys.argv[1]}/mlflow.db")
runs = mlflow.search_runs(search_all_experiments=True)
for _, run in runs[runs["tags.mlflow.parentRunId"].notna()].iterrows():
    print(f"{run['tags.mlflow.runName']}: {run['status']}\n  failure_reason: {run.get('tags.failure_reason')}")
PY
    ;;
  startup)  # 1 GPU (issue 27): where a point's fixed seconds go. benchmarks/overhead.py on the GPU (its timed
    # log kept), the orchestrator and a worker under cProfile, torchrun alone, nvidia-smi/NVML and torch
    # import/CUDA init, a llama2_7b model build (eager decode: no compile).
    { nvidia-smi --query-gpu=name,persistence_mode,driver_version --format=csv
      for i in 1 2; do seconds "nvidia-smi query" nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; done
      seconds "import torch" python -c "import torch"
      seconds "import torch + CUDA context" python -c "import torch; torch.zeros(1, device='cuda')"
      seconds "import parbench.worker" python -c "import parbench.worker"
      seconds "import mlflow" python -c "import mlflow"
      seconds "torchrun --no-python true, 1 proc" python -m torch.distributed.run --standalone --nproc-per-node=1 --no-python true
      python -X importtime -c "import parbench.worker" 2> "$W/importtime_worker.txt"
      python -X importtime -m parbench.worker 2> "$W/importtime_worker_main.txt" || true
    } 2>&1 | tee "$W/probe.txt"
    # Twice: the first on a fresh machine compiles every module's bytecode once (kept in ~/.cache/parbench);
    # the second is what each later sweep costs.
    for run in cold warm; do
      python benchmarks/overhead.py --log "$W/overhead_$run.log" --out "$W/overhead_$run.json" "$@" 2>&1 | tail -15 \
        | tee "$W/overhead_$run.txt"; pack
    done
    python -m cProfile -o "$W/orchestrator.prof" -m parbench hydra.run.dir="$W/one" tracking.uri="sqlite:///$W/mlflow.db" \
      "$@" 2>&1 | tail -5
    python -c "import pstats, sys; pstats.Stats(sys.argv[1], stream=open(sys.argv[2], 'w')).sort_stats('cumulative').print_stats(70)" \
      "$W/orchestrator.prof" "$W/orchestrator.txt"
    profile_worker "$W/one" worker_tiny
    INF7=(workload=inference model=llama2_7b hardware.gpus_per_node=1 workload.decode_mode=eager workload.warmup=0
          workload.repeats=1 workload.output_len=4 workload.profile=false)
    python -m parbench "${INF7[@]}" hydra.run.dir="$W/build7b" tracking.uri="sqlite:///$W/mlflow.db" "$@" 2>&1 \
      | grep -E "model ready|FINISHED|FAILED|model_build"; pack
    profile_worker "$W/build7b" worker_7b
    ;;
  reuse)  # 1 GPU (issue 27, ~5 min on an H100): llama2_7b compiled decode (regional compilation), batch 4,
    # into an empty compile cache: input 64/128 x output 32/128. The first point compiles (goal <= 45 s),
    # the three others load it (one key for every length; goal: measuring <= 15 s after the first rank
    # line); TPOT/MBU at input 64 against 5.74-5.86 ms, 68.5-69.5 %. Then a tiny fp32 model of 32
    # layers, compiled and CUDA-graphed, against the eager recompute reference (verify: 0 mismatched).
    # INPUTS/OUTPUTS narrow the grid; reuse.txt and check.txt hold the tables.
    rm -rf "$W/compile_cache"
    reuse_part() {  # reuse_part NAME OVERRIDES...: benchmarks/compile_reuse.py, its table in NAME.txt
      local name=$1; shift
      echo "== $name: python benchmarks/compile_reuse.py $*" | tee -a "$W/commands.txt"
      python benchmarks/compile_reuse.py --cache "$W/compile_cache" --root "$W/$name" --log "$W/$name.log" \
        --out "$W/$name.json" hardware.gpus_per_node=1 "$@" 2>&1 \
        | grep -v "\] step .*(warmup\|measure)" | tee "$W/$name.out" | tail -8 | tee "$W/$name.txt"
      pack
    }
    reuse_part reuse model=llama2_7b workload.batch_size=4 workload.input_len="${INPUTS:-64,128}" \
      workload.output_len="${OUTPUTS:-32,128}" workload.warmup=1 workload.repeats=5 launch.timeout_s=300 "$@"
    reuse_part check model=tiny model.layers=32 workload.dtype=fp32 workload.verify=true workload.input_len=64 \
      workload.output_len=16 workload.repeats=1 launch.timeout_s=120 "$@"
    ;;
  families)  # 1 GPU (issue 27): qwen3_1_7b against llama3_2_1b (eager, seq 2048, batch 4; selective AC for
    # qwen3 as in the issue), then the compiled default path of the 1B comparison (seq 4096, batch 2).
    COMMON=(hardware.gpus_per_node=1 workload.warmup_steps=3 workload.steps=10 profile.enabled=false)
    stamped families "${COMMON[@]}" workload.seq_len=2048 workload.batch_size=4 model=llama3_2_1b,qwen3_1_7b "$@"
    stamped qwen3_selective "${COMMON[@]}" workload.seq_len=2048 workload.batch_size=4 model=qwen3_1_7b \
      workload.activation_checkpointing=selective "$@"
    stamped compiled1b "${COMMON[@]}" "${L1B[@]}" workload.seq_len=4096 workload.batch_size=2 workload.compile=true "$@"
    ;;
  calib31)  # 1 GPU (issue 31), one call of at most ~9 min: `parbench calibrate` resumed from the runs recorded in
    # docs/results/2026-11-25_calibration_gpu (measured_<hw>.json: only runs added since are measured), a profiled
    # Qwen3 full-checkpointing step (DIAG=1: its op shares), then the accuracy cases the recorded
    # accuracy_<hw>.jsonl does not hold yet or holds unsteady (p90/p10 step times > 1.15), each appended to
    # $OUT/accuracy_<hw>.jsonl as it ends, until the budget. `calib31 h200` for the H200.
    # Carry an earlier call's jsonl back as ACC_FROM=<file> (none: start empty); REDO="run ..." measures those
    # calibration runs again; REC=<results dir> resumes from another recorded ledger; CASES=infer measures those only.
    HW=${1:-h100_sxm}; END=$((SECONDS + ${BUDGET_S:-530}))
    CAL=(hardware=$HW tracking.uri=sqlite:////tmp/mlflow.db hardware.gpus_per_node=1)
    REC=${REC:-docs/results/2026-11-25_calibration_gpu} WORK=outputs/calibrate/${HW}_calib31 JSONL=${OUT:-$W}/accuracy_$HW.jsonl
    mkdir -p "$WORK"; rm -f "$W/$HW.yaml"
    [ -e "$REC/measured_$HW.json" ] && [ ! -e "$WORK/measured.json" ] && cp "$REC/measured_$HW.json" "$WORK/measured.json"
    [ -n "${REDO:-}" ] && python -c "import json, sys; p = sys.argv[1]; d = json.load(open(p)); [d.pop(k, None) for k in sys.argv[2:]]; json.dump(d, open(p, 'w'), indent=1)" "$WORK/measured.json" $REDO
    FROM=${ACC_FROM:-$REC/accuracy_$HW.jsonl}
    [ -e "$JSONL" ] || { [ -e "$FROM" ] && cp "$FROM" "$JSONL" || : > "$JSONL"; }
    timeout $((END - SECONDS - 90)) python -m parbench calibrate "${CAL[@]}" --work "$WORK" --out "$W/$HW.yaml" 2>&1 \
      | grep -v INFO | tee "$W/calibrate.log"
    cp "$WORK/measured.json" "$W/measured_$HW.json"; pack
    [ -e "$W/$HW.yaml" ] || { echo "calibration not finished: call the suite again"; exit 0; }
    [ "${DIAG:-0}" = 1 ] && timeout 120 python -m parbench "${CAL[@]}" parallel=dp workload=train model=qwen3_1_7b \
      workload.seq_len=2048 workload.batch_size=2 workload.activation_checkpointing=full workload.steps=4 \
      workload.warmup_steps=2 profile.enabled=true hydra.run.dir="$W/diag_qwen3" 2>&1 | grep -v "\] step" | tail -40 \
      > "$W/diag_qwen3.log"
    python benchmarks/predictor_accuracy.py measure --jsonl "$JSONL" --cases "${CASES:-train,infer}" --budget-s $((END - SECONDS)) hardware=$HW
    python benchmarks/predictor_accuracy.py table --jsonl "$JSONL" --calibration "$W/$HW.yaml" --out "$W/accuracy_$HW.md"
    ;;
  host31)  # 1 GPU (issue 31): where an eager step's host dispatch goes. The calibration's tiny host runs again (60
    # steps) and one profiled, then real shapes at 128 tokens (host-bound), then the Qwen3 case the model over-predicts;
    # each run's step time, spread and host_dispatch_s into host31.txt
    U=(hardware.gpus_per_node=1 parallel=dp workload=train workload.batch_size=1 profile.enabled=false)
    T=(model=tiny workload.seq_len=64 workload.batch_size=2 workload.steps=60)
    sweep tiny "${U[@]}" "${T[@]}" model.layers=2,4,8
    sweep tiny_full "${U[@]}" "${T[@]}" model.layers=4 workload.activation_checkpointing=full
    sweep tiny_qwen3 "${U[@]}" "${T[@]}" model.layers=4 model.qk_norm=true
    sweep tiny_gpt2 "${U[@]}" model=gpt2_xl model.hidden=64 model.heads=4 model.kv_heads=4 model.ffn=256 model.vocab=512 \
      model.max_seq_len=256 model.layers=4 workload.seq_len=64 workload.batch_size=2 workload.steps=60
    sweep tiny_profiled "${U[@]}" "${T[@]}" model.layers=4 profile.enabled=true profile.plots=false
    R=(workload.seq_len=128 workload.steps=20)
    sweep real_llama "${U[@]}" "${R[@]}" model=llama3_2_1b model.layers=4,8,16 workload.activation_checkpointing=none,full
    sweep real_qwen3 "${U[@]}" "${R[@]}" model=qwen3_1_7b workload.activation_checkpointing=none,full
    sweep real_gpt2 "${U[@]}" "${R[@]}" model=gpt2_xl
    sweep case_qwen3 "${U[@]}" model=qwen3_1_7b workload.seq_len=2048 workload.batch_size=2 workload.steps=8 \
      workload.warmup_steps=3
    sweep case_gpt2 "${U[@]}" model=gpt2_xl workload.seq_len=1024 workload.batch_size=4 workload.steps=8 workload.warmup_steps=3
    python benchmarks/run_table.py "$W" layers checkpointing | tee "$W/host31.txt"
    find "$W/tiny_profiled" -name steps.csv -exec cat {} \; > "$W/tiny_profiled_steps.txt"
    ;;
  prefill31)  # 1 GPU (issue 31), one call: the prefill replayed as a CUDA graph. Its GPU tests; Llama 1B at batch 1 and
    # GPT-2 XL at batch 4 with workload.prefill_graph on and off (TTFT beside prefill_dispatch_s and the prediction,
    # tokens verified against the cache-free reference); then the accuracy benchmark's inference cases, each appended
    # to $OUT/accuracy_infer_<hw>.jsonl as it ends, and their table with the shipped profile. `prefill31 h200` for the H200.
    HW=${1:-h100_sxm}; END=$((SECONDS + ${BUDGET_S:-540}))
    python -m pytest -q -p no:cacheprovider tests/workloads/test_inference.py -k graph 2>&1 | tail -4 | tee "$W/tests.txt"
    U=(hardware=$HW hardware.gpus_per_node=1 parallel=dp workload=inference workload.profile=false workload.output_len=64
       workload.repeats=5 workload.verify=true workload.input_len=512 workload.prefill_graph=true,false)
    sweep ab_llama "${U[@]}" model=llama3_2_1b workload.batch_size=1
    sweep ab_gpt2 "${U[@]}" model=gpt2_xl workload.batch_size=4
    python - "$W" <<'PY' | tee "$W/prefill31.txt"
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("ab_*/*/results.json")):
    m = json.loads(f.read_text())["metrics"]
    o = f.parent / ".hydra" / "overrides.yaml"
    what = " ".join(x.strip("- ").split(".")[-1] for x in o.read_text().splitlines() if "model=" in x or "prefill_graph" in x)
    ms = lambda k: 1e3 * m.get(k, float("nan"))
    print(f"{what:40s} TTFT {ms('ttft_s'):7.2f} (ci {ms('ttft_s_ci_low'):7.2f}-{ms('ttft_s_ci_high'):7.2f}) dispatch "
          f"{ms('prefill_dispatch_s'):7.2f} pred {ms('predicted_ttft_s'):7.2f} | TPOT {ms('tpot_s'):6.3f} pred "
          f"{ms('predicted_tpot_s'):6.3f} ms | mismatched tokens {m.get('decode_mismatched_tokens')} | peak "
          f"{m.get('mem_peak_allocated_gb', float('nan')):.2f} GB")
PY
    pack
    JSONL=${OUT:-$W}/accuracy_infer_$HW.jsonl
    python benchmarks/predictor_accuracy.py measure --jsonl "$JSONL" --cases infer --budget-s $((END - SECONDS)) hardware=$HW
    python benchmarks/predictor_accuracy.py table --jsonl "$JSONL" --calibration conf/calibrations/$HW.yaml \
      --out "$W/accuracy_infer_$HW.md"
    ;;
  gpt2host31)  # 1 GPU (issue 31): does a GPT-2 block's host dispatch grow with its size? GPT-2 XL's measured host time
    # (107.6 ms at seq 128, 2026-11-25) is 1.6x what the tiny GPT-2 blocks' fit gives. Host-bound steps (seq 128, batch 1)
    # at 12/24/48 full-size layers, and 24 layers at hidden 64/400/1600; each run's host_dispatch_s into gpt2host31.txt
    U=(hardware.gpus_per_node=1 parallel=dp workload=train model=gpt2_xl workload.seq_len=128 workload.batch_size=1
       workload.steps=20 profile.enabled=false)
    sweep depth "${U[@]}" model.layers=12,24,48
    sweep width "${U[@]}" model.layers=24 model.hidden=64,400 model.heads=4 model.kv_heads=4 model.ffn=256
    python benchmarks/run_table.py "$W" model. | tee "$W/gpt2host31.txt"
    ;;
  ops31)  # 1 GPU (issue 31): where GPT-2 XL's under-predicted device time goes. Each op of a step alone against its
    # modelled cost (benchmarks/op_rates.py) for the accuracy cases' shapes, then a profiled eager step of GPT-2 XL
    # and of the 1B Llama at the same tokens (ops.csv: kernel time per op)
    [ "${OP_RATES:-1}" = 1 ] && for shape in "model=gpt2_xl workload.seq_len=1024 workload.batch_size=4" \
                 "model=gpt2_xl workload.seq_len=2048 workload.batch_size=4 model.max_seq_len=2048" \
                 "model=llama3_2_1b workload.seq_len=1024 workload.batch_size=4" \
                 "model=llama3_2_1b workload.seq_len=4096 workload.batch_size=2" \
                 "model=qwen3_1_7b workload.seq_len=2048 workload.batch_size=2"; do
      python benchmarks/op_rates.py --out "$W/op_rates.md" hardware.gpus_per_node=1 $shape 2>&1 | tail -3
    done
    pack
    U=(hardware.gpus_per_node=1 parallel=dp workload=train workload.seq_len=1024 workload.batch_size=4 workload.steps=6
       workload.warmup_steps=3 profile.enabled=true)
    sweep profiled "${U[@]}" model="${PROFILED:-gpt2_xl,llama3_2_1b}" "$@"
    python - "$W" <<'PY' | tee "$W/ops31.txt"
import csv, collections, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("profiled/*/*/ops.csv")):
    rows = [r for r in csv.DictReader(f.open()) if r["rank"] == "0"]
    by_op = collections.Counter()
    for r in rows:
        by_op[(r["phase"], r["op"])] += float(r["total_s"])
    total = sum(by_op.values())
    print(f"== {f.parent.parent.name}: {1e3 * total:.1f} ms of kernels in the profiled steps")
    for (phase, op), s in by_op.most_common(25):
        print(f"  {phase:10s} {op:50s} {1e3 * s:8.2f} ms {100 * s / total:5.1f} %")
PY
    ;;
  hostac31)  # 1 GPU (issue 31): what checkpointing adds to an eager step's host dispatch, by family. Host-bound steps
    # (seq 128, batch 1) of GPT-2 XL (24 layers), the 1B Llama and Qwen3 1.7B under none, full and selective
    U=(hardware.gpus_per_node=1 parallel=dp workload=train workload.seq_len=128 workload.batch_size=1 workload.steps=20
       profile.enabled=false workload.activation_checkpointing=none,full,selective)
    sweep gpt2 "${U[@]}" model=gpt2_xl model.layers=24
    sweep llama "${U[@]}" model=llama3_2_1b
    sweep qwen3 "${U[@]}" model=qwen3_1_7b
    python benchmarks/run_table.py "$W" | tee "$W/hostac31.txt"
    ;;
  unseen31)  # 1 GPU (issue 31): cases outside the accuracy benchmark's list, with the shipped profile: what a new
    # user sees first (the default run, inference and the attention microbenchmark), then layouts the model never saw
    sweep default hardware.gpus_per_node=1
    sweep default_inference workload=inference hardware.gpus_per_node=1
    sweep attention workload=attention hardware.gpus_per_node=1
    U=(hardware.gpus_per_node=1 parallel=dp workload=train workload.steps=8 workload.warmup_steps=3 profile.enabled=false)
    sweep train_llama "${U[@]}" model=llama3_2_1b workload.seq_len=2048 workload.batch_size=4 workload.compile=true \
      workload.activation_checkpointing=selective
    sweep train_llama8k "${U[@]}" model=llama3_2_1b workload.seq_len=8192 workload.batch_size=1 workload.activation_checkpointing=full
    sweep train_qwen3 "${U[@]}" model=qwen3_1_7b workload.seq_len=1024 workload.batch_size=8
    sweep train_gpt2 "${U[@]}" model=gpt2_xl workload.seq_len=1024 workload.batch_size=8 workload.compile=true
    I=(hardware.gpus_per_node=1 parallel=dp workload=inference workload.output_len=64 workload.repeats=3 workload.profile=false)
    sweep infer_qwen3 "${I[@]}" model=qwen3_1_7b workload.input_len=1024 workload.batch_size=16
    sweep infer_gpt2 "${I[@]}" model=gpt2_xl workload.input_len=1024 workload.batch_size=2
    python benchmarks/run_table.py "$W" model workload. | tee "$W/unseen31.txt"
    ;;
  infer31)  # 1 GPU (issue 31): the native engine's batches outside the accuracy benchmark's list, each also
    # profiled by kernel kind beside the model's parts (benchmarks/inference_kernels.py), with the checkout's profile
    I=(hardware.gpus_per_node=1 parallel=dp workload=inference workload.output_len=64 workload.repeats=3 workload.profile=false)
    for case in "qwen3_1_7b 16 1024" "qwen3_1_7b 32 256" "gpt2_xl 8 512" "gpt2_xl 2 896" "llama3_2_1b 32 1024" "llama3_2_1b 2 4096"; do
      set -- $case
      sweep "infer_${1}_${2}x$3" "${I[@]}" model=$1 workload.batch_size=$2 workload.input_len=$3
    done
    python benchmarks/run_table.py "$W" model workload. | tee "$W/infer31.txt"
    for case in "gpt2_xl 8x512,2x896,1x512" "qwen3_1_7b 16x1024,8x512,1x1024" "llama3_2_1b 32x1024,16x1024,2x4096"; do
      set -- $case
      timeout 200 python benchmarks/inference_kernels.py --model $1 --points $2 2>&1 | grep -v -i warn | tee -a "$W/kernels.txt"
      pack
    done
    ;;
  big31)  # 1 GPU (issue 31): 7-8B models' inference, which no calibration run or accuracy case has (per-rank
    # GEMMs of 33-180 MB), with the checkout's profile: the default inference run, the issue's llama2_7b one,
    # batches 1 to 32 of the 7-8B models, and GPT-2 XL at batch 32 (one query per KV head, every SM busy)
    sweep default_tiny workload=inference hardware.gpus_per_node=1
    sweep default_llama2_7b workload=inference model=llama2_7b hardware.gpus_per_node=1
    I=(hardware.gpus_per_node=1 parallel=dp workload=inference workload.output_len=64 workload.repeats=3 workload.profile=false)
    sweep infer_gpt2 "${I[@]}" model=gpt2_xl workload.batch_size=32 workload.input_len=512
    sweep infer_8b "${I[@]}" model=llama3_8b,qwen3_8b workload.batch_size=1,8,32 workload.input_len=512
    sweep infer_7b "${I[@]}" model=llama2_7b workload.batch_size=2,16 workload.input_len=1024
    python benchmarks/run_table.py "$W" model workload. | tee "$W/big31.txt"
    pack
    ;;
  trainkernels31)  # 1 GPU (issue 31): a training step's kernels by kind and each GEMM shape's achieved rate
    # beside the model's (benchmarks/train_kernels.py), the device-bound accuracy cases, with the checkout's profile
    for case in "model=llama3_2_1b workload.seq_len=4096 workload.batch_size=2" \
                "model=gpt2_xl workload.seq_len=1024 workload.batch_size=4" \
                "model=qwen3_1_7b workload.seq_len=2048 workload.batch_size=2" \
                "model=llama3_2_1b workload.seq_len=4096 workload.batch_size=2 workload.compile=true" \
                "model=llama3_2_1b workload.seq_len=2048 workload.batch_size=2 workload.activation_checkpointing=full"; do
      timeout 200 python benchmarks/train_kernels.py "$case" 2>&1 | grep -v -i "warn\|INFO" | tee -a "$W/train_kernels.txt"
      pack
    done
    ;;
  *) echo "unknown suite $SUITE"; exit 2 ;;
esac
pack
