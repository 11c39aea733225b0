"""How close the performance model (parbench.predict) comes to measured runs on this GPU machine:
each case runs through the real CLI, and its predicted step time and peak memory (the same config,
the calibration the run used) are set beside the measured ones.

    python benchmarks/predictor_accuracy.py [--cases 1b] [--out accuracy.md] [overrides...]

Cases (issue 18): the 1B model on one GPU (eager and compiled; activation checkpointing none,
selective, full; batch 2, 4, 8), the 3B and 8B shapes on one GPU with checkpointing so they fit
(an H200 for 8B). Goal: median |error| <= 10 % for step time and peak memory, none worse than 25 %,
and the layout the model ranks first within 5 % of the fastest measured. Inference (TTFT/TPOT) is
not modelled yet. Run `parbench calibrate hardware=...` first to measure with a calibration."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from parbench.fmt import format_metric
from parbench.prepare import validate
from parbench.planner import compose_config
from parbench.predict import predict

ONE_GPU = ["hardware.gpus_per_node=1", "parallel=dp", "workload.steps=10", "workload.warmup_steps=3"]
LLAMA_3B = ["model=llama3_2_1b", "model.layers=28", "model.hidden=3072", "model.heads=24", "model.kv_heads=8",
            "model.ffn=8192", "model.tie_embeddings=true"]
CASES = {
    "1b": [[*ONE_GPU, "model=llama3_2_1b", "workload.seq_len=2048", f"workload.batch_size={b}",
            f"workload.activation_checkpointing={ac}", f"workload.compile={c}"]
           for c in ("false", "true") for ac in ("none", "selective", "full") for b in (2, 4, 8)],
    "3b": [[*ONE_GPU, *LLAMA_3B, "workload.seq_len=2048", "workload.batch_size=4",
            f"workload.activation_checkpointing={ac}"] for ac in ("selective", "full")],
    "8b": [[*ONE_GPU, "model=llama3_8b", "workload.seq_len=2048", "workload.batch_size=2",
            "workload.activation_checkpointing=full"]],
}


def measure(overrides: list[str], job_dir: Path, uri: str) -> dict | None:
    cmd = [sys.executable, "-m", "parbench", *overrides, f"hydra.run.dir={job_dir}", f"tracking.uri={uri}"]
    print("$ python -m parbench " + " ".join(overrides), flush=True)
    if subprocess.run(cmd).returncode:
        return None
    return json.loads((job_dir / "results.json").read_text())["metrics"]


def error_pct(predicted: float, measured: float) -> float:
    return 100 * (predicted - measured) / measured


def row(overrides: list[str], measured: dict) -> dict:
    cfg = compose_config(overrides)
    p = predict(cfg, validate(cfg, None))
    return {"case": " ".join(o for o in overrides if o not in ONE_GPU), "calibration": p.calibration,
            "predicted_s": p.step_time_s, "measured_s": measured["step_time_s"],
            "step_error_pct": error_pct(p.step_time_s, measured["step_time_s"]),
            "predicted_gb": p.memory.total_gb, "measured_gb": measured["mem_peak_allocated_gb"],
            "mem_error_pct": error_pct(p.memory.total_gb, measured["mem_peak_allocated_gb"]),
            "predicted_tokens_per_s": p.tokens_per_s, "measured_tokens_per_s": measured["throughput_tokens_per_s"]}


def summary(rows: list[dict]) -> list[str]:
    lines = []
    for key in ("step_error_pct", "mem_error_pct"):
        errors = [abs(r[key]) for r in rows]
        lines.append(f"{key}: median |error| {statistics.median(errors):.1f} %, worst {max(errors):.1f} %")
    picked = max(rows, key=lambda r: r["predicted_tokens_per_s"])
    best = max(rows, key=lambda r: r["measured_tokens_per_s"])
    share = picked["measured_tokens_per_s"] / best["measured_tokens_per_s"]
    lines.append(f"the model's pick ({picked['case']}) measures {share:.1%}"
                 f" of the fastest measured ({best['case']})")
    return lines


def markdown(rows: list[dict]) -> str:
    head = ("| case | predicted step | measured step | error | predicted peak | measured peak | error |\n"
            "|---|---|---|---|---|---|---|")
    body = [f"| {r['case']} | {format_metric('s', r['predicted_s'])} | {format_metric('s', r['measured_s'])} | "
            f"{r['step_error_pct']:+.1f} % | {format_metric('gb', r['predicted_gb'])} | "
            f"{format_metric('gb', r['measured_gb'])} | {r['mem_error_pct']:+.1f} % |" for r in rows]
    return "\n".join([head, *body, "", *summary(rows), f"calibration: {rows[0]['calibration']}"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="1b,3b,8b", help="comma list of: " + ", ".join(CASES))
    parser.add_argument("--out", type=Path, help="markdown table (for docs/results/)")
    parser.add_argument("overrides", nargs="*", help="added to every case, e.g. hardware=h200")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{tmp}/mlflow.db"
        for name in args.cases.split(","):
            for i, case in enumerate(CASES[name]):
                overrides = [*case, *args.overrides]
                measured = measure(overrides, Path(tmp) / f"{name}_{i}", uri)
                if measured is None:
                    print(f"  failed: {' '.join(overrides)} (left out of the table)", flush=True)
                    continue
                rows.append(row(overrides, measured))
                r = rows[-1]
                print(f"  step {r['step_error_pct']:+.1f} %, peak memory {r['mem_error_pct']:+.1f} %", flush=True)
    text = markdown(rows)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
