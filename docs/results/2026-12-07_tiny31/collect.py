"""One JSON line of a finished inference job dir: its point, measured and predicted latencies, the replay's kernel count
and the op-by-op profile's prefill device time by layer and op type.
    python docs/results/2026-12-07_tiny31/collect.py JOB_DIR '{"layers": 2, ...}' >> grid.jsonl"""

import csv
import json
import sys
from pathlib import Path

job, point = Path(sys.argv[1]), json.loads(sys.argv[2])
m = json.loads((job / "results.json").read_text())["metrics"]
keep = ("ttft_s_p50", "ttft_s_p90", "tpot_s_p50", "prefill_kernels", "predicted_ttft_s", "predicted_tpot_s")
rows = list(csv.DictReader((job / "inference_layers.csv").open())) if (job / "inference_layers.csv").exists() else []
prefill = {f"{r['layer']}/{r['op_type']}": float(r["ms_per_step"]) for r in rows if r["phase"] == "prefill"}
print(json.dumps({**point, **{k: m.get(k) for k in keep}, "prefill_ms": prefill}))
