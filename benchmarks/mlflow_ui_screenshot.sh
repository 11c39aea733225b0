#!/usr/bin/env bash
# What a person sees in the MLflow UI: a small CPU sweep into a fresh store, `mlflow ui` on
# loopback, and headless Chromium (Debian's `chromium`) screenshots of the experiment's runs page
# (its description links the latest sweep), of the link the sweep prints
# (its children sorted by the headline figure, their figures as columns), of the sweep's parent
# run (its description: verdict and table) and of one child run (its own figures, the trace hint).
#   bash benchmarks/mlflow_ui_screenshot.sh OUT_DIR [SWEEP_OVERRIDES...]
set -euo pipefail
OUT=$(realpath -m "${1:?usage: mlflow_ui_screenshot.sh OUT_DIR [overrides]}"); shift
mkdir -p "$OUT"; W=${STORE_DIR:-$(mktemp -d)}; PORT=${PORT:-5055}
python -m parbench -m hardware=cpu "${@:-parallel=dp,fsdp}" tracking.uri="sqlite:///$W/mlflow.db" \
  hydra.sweep.dir="$W/sweep" > "$OUT/sweep.log" 2>&1
LINK=$(grep -A1 "^Compare the runs" "$OUT/sweep.log" | grep -o "http://[^ ]*" | tail -1)
read -r EXP RUN CHILD < <(python - "$W" <<'PY'
import json, sys
import mlflow
mlflow.set_tracking_uri(f"sqlite:///{sys.argv[1]}/mlflow.db")
parent = json.load(open(f"{sys.argv[1]}/sweep/mlflow_parent_run.json"))["run_id"]
run = mlflow.get_run(parent)
children = mlflow.search_runs([run.info.experiment_id], f"tags.mlflow.parentRunId = '{parent}' "
                              "and attributes.status = 'FINISHED'", order_by=["start_time DESC"])
print(run.info.experiment_id, parent, children["run_id"].iloc[0])
PY
)
mlflow ui --backend-store-uri "sqlite:///$W/mlflow.db" --host 127.0.0.1 --port "$PORT" > "$W/ui.log" 2>&1 &
UI=$!; trap 'kill $UI 2>/dev/null' EXIT
for _ in $(seq 60); do curl -sf "http://127.0.0.1:$PORT/" > /dev/null && break; sleep 1; done
shot() {  # URL FILE [HEIGHT]: Chromium's flags for this closed network (no background requests)
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$(mktemp -d)" --window-size="1600,${3:-1000}" \
    --virtual-time-budget=30000 --screenshot="$2" "$1" > /dev/null 2>&1
}
shot "http://127.0.0.1:$PORT/#/experiments/$EXP/runs" "$OUT/mlflow_experiment.png"  # its description: the latest sweep
shot "${LINK/127.0.0.1:5000/127.0.0.1:$PORT}" "$OUT/mlflow_sweep_link.png"
shot "http://127.0.0.1:$PORT/#/experiments/$EXP/runs/$RUN" "$OUT/mlflow_sweep_run.png"
shot "http://127.0.0.1:$PORT/#/experiments/$EXP/runs/$CHILD" "$OUT/mlflow_child_run.png" 1250  # its description is last
echo "screenshots: $OUT/mlflow_experiment.png $OUT/mlflow_sweep_link.png $OUT/mlflow_sweep_run.png" \
  "$OUT/mlflow_child_run.png (store: $W)"
