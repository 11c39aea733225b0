#!/usr/bin/env bash
# Fault-injection run behind docs/reliability.md: every fault parbench handles, injected into real
# torchrun jobs on CPU (gloo, 2 ranks), then the store's runs by status and the processes left.
# Usage: bash benchmarks/fault_injection.sh [work dir]   (about 10 minutes on 2 cores)
set -uo pipefail
ROOT=$(realpath "${1:-$(mktemp -d /tmp/parbench-faults.XXXX)}")
mkdir -p "$ROOT"
URI="sqlite:///$ROOT/mlflow.db"
export CUDA_VISIBLE_DEVICES=
pb() { python -m parbench "$@" hardware=cpu "tracking.uri=$URI"; }  # -m (a sweep) must come first
LONG=workload.steps=100000  # long enough to inject a fault into
FAULTS=0

wait_steps() {  # job dir, number of step lines
  until [ -f "$1/steps.jsonl" ] && [ "$(wc -l < "$1/steps.jsonl")" -ge "$2" ]; do sleep 0.5; done
}
rank_pid() {  # job dir, rank -> pid of that worker
  for p in $(pgrep -f "parbench.worker $1\$"); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$2" && echo "$p"
  done
}
orchestrator_pid() {  # sweep dir -> pid of the python running that sweep (not the shell around it)
  pgrep -f "parbench -m hydra.sweep.dir=$1 "
}
step() { echo; echo "== $((++FAULTS)). $*"; }

step "a rank raises (debug.crash_at_step=1) in a 2-point sweep"
pb -m "hydra.sweep.dir=$ROOT/crash" workload.steps=3 debug.crash_at_step=1,-1 > "$ROOT/crash.out" 2>&1
echo "exit $?"

step "resume: the same sweep again skips the FINISHED point, reruns the failed one"
pb -m "hydra.sweep.dir=$ROOT/resume" workload.steps=3 debug.crash_at_step=1,-1 > "$ROOT/resume.out" 2>&1
echo "exit $?; $(grep -o 'Skipped [0-9]* point(s)[^(]*' "$ROOT/resume.out")"

step "kill -9 of rank 1 mid-run, in a 2-point sweep"
pb -m "hydra.sweep.dir=$ROOT/rankkill" "$LONG,3" > "$ROOT/rankkill.out" 2>&1 &
wait_steps "$ROOT/rankkill/0" 4; kill -9 "$(rank_pid "$ROOT/rankkill/0" 1)"; wait $!
echo "exit $?"

step "kill -STOP of rank 1 (launch.stall_timeout_s=15)"
pb "hydra.run.dir=$ROOT/sigstop" "$LONG" launch.stall_timeout_s=15 > "$ROOT/sigstop.out" 2>&1 &
wait_steps "$ROOT/sigstop" 4; kill -STOP "$(rank_pid "$ROOT/sigstop" 1)"; wait $!
echo "exit $?"

step "rank 1 hangs before a collective (debug.hang_at_step=6, launch.stall_timeout_s=15)"
pb "hydra.run.dir=$ROOT/hang" "$LONG" debug.hang_at_step=6 debug.fault_rank=1 launch.stall_timeout_s=15 \
  > "$ROOT/hang.out" 2>&1
echo "exit $?"

step "Ctrl-C (SIGINT) to a running sweep"
pb -m "hydra.sweep.dir=$ROOT/sigint" "$LONG,3" > "$ROOT/sigint.out" 2>&1 &
wait_steps "$ROOT/sigint/0" 3; kill -INT "$(orchestrator_pid "$ROOT/sigint")"; wait $!
echo "exit $?; tracebacks: $(grep -c Traceback "$ROOT/sigint.out")"

step "kill -9 of the sweep itself; the next sweep marks its runs orphaned"
pb -m "hydra.sweep.dir=$ROOT/sigkill" "$LONG" > "$ROOT/sigkill.out" 2>&1 &
wait_steps "$ROOT/sigkill/0" 3; kill -9 "$(orchestrator_pid "$ROOT/sigkill")"; wait $!; sleep 5
echo "processes left right after: $(pgrep -f "$ROOT/sigkill" | wc -l)"
pb -m "hydra.sweep.dir=$ROOT/after" workload.steps=2 > "$ROOT/after.out" 2>&1
echo "exit $?; $(grep -o 'marked [0-9]* orphaned run(s) FAILED' "$ROOT/after.out")"

CG=/sys/fs/cgroup/memory/parbench-faults-$$
if mkdir "$CG" 2>/dev/null; then
  step "host OOM-kill: rank 1 in a 256 MiB memory cgroup allocates 2 GB (debug.alloc_at_step=40)"
  echo $((256 * 1024 * 1024)) > "$CG/memory.limit_in_bytes"
  pb "hydra.run.dir=$ROOT/oom" "$LONG" debug.alloc_at_step=40 debug.alloc_gb=2 debug.fault_rank=1 \
    > "$ROOT/oom.out" 2>&1 &
  wait_steps "$ROOT/oom" 3; rank_pid "$ROOT/oom" 1 > "$CG/cgroup.procs"; wait $!
  echo "exit $?"; sleep 2; rmdir "$CG"
fi

echo; echo "== the store after $FAULTS faults"
python - "$URI" <<'EOF'
import sys
import mlflow
mlflow.set_tracking_uri(sys.argv[1])
runs = mlflow.search_runs(search_all_experiments=True, order_by=["start_time ASC"])
parents = (runs["tags.parbench.sweep"] == "true").sum()
print(f"runs recorded: {len(runs)} ({parents} sweep parents, {len(runs) - parents} jobs); by status: "
      + ", ".join(f"{s} {n}" for s, n in runs.status.value_counts().items()))
for _, run in runs.iterrows():
    reason = run.get("tags.failure_reason")
    reason = reason if isinstance(reason, str) else ""
    print(f"  {run.status:8s} {run['tags.mlflow.runName'][:48]:48s} {reason[:150]}")
EOF
echo "processes left: $(pgrep -f "python.*$ROOT/" | wc -l)"  # every job's command line names its dir
