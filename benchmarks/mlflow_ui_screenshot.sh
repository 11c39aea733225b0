#!/usr/bin/env bash
# What a person sees in the MLflow UI: a small CPU sweep into a fresh store, `mlflow ui` on
# loopback, and headless Chromium (Debian's `chromium`) screenshots of the experiment's runs table
# and of the sweep's parent run (its description holds the sweep's table).
#   bash benchmarks/mlflow_ui_screenshot.sh OUT_DIR [SWEEP_OVERRIDES...]
set -euo pipefail
OUT=$(realpath -m "${1:?usage: mlflow_ui_screenshot.sh OUT_DIR [overrides]}"); shift
mkdir -p "$OUT"; W=$(mktemp -d); PORT=${PORT:-5055}
python -m parbench -m hardware=cpu "${@:-parallel=dp,fsdp}" tracking.uri="sqlite:///$W/mlflow.db" \
  hydra.sweep.dir="$W/sweep" > "$OUT/sweep.log" 2>&1
read -r EXP RUN < <(python - "$W" <<'PY'
import json, sys
import mlflow
mlflow.set_tracking_uri(f"sqlite:///{sys.argv[1]}/mlflow.db")
parent = json.load(open(f"{sys.argv[1]}/sweep/mlflow_parent_run.json"))["run_id"]
print(mlflow.get_run(parent).info.experiment_id, parent)
PY
)
mlflow ui --backend-store-uri "sqlite:///$W/mlflow.db" --host 127.0.0.1 --port "$PORT" > "$W/ui.log" 2>&1 &
UI=$!; trap 'kill $UI 2>/dev/null' EXIT
for _ in $(seq 60); do curl -sf "http://127.0.0.1:$PORT/" > /dev/null && break; sleep 1; done
shot() {  # URL FILE: Chromium's flags for this closed network (no background requests)
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$(mktemp -d)" --window-size=1600,1000 \
    --virtual-time-budget=30000 --screenshot="$2" "$1" > /dev/null 2>&1
}
shot "http://127.0.0.1:$PORT/#/experiments/$EXP/runs" "$OUT/mlflow_runs.png"
shot "http://127.0.0.1:$PORT/#/experiments/$EXP/runs/$RUN" "$OUT/mlflow_sweep_run.png"
echo "screenshots: $OUT/mlflow_runs.png $OUT/mlflow_sweep_run.png"
