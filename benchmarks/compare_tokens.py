"""Compare the native inference engine's greedy tokens across the jobs of one sweep:
    python benchmarks/compare_tokens.py SWEEP_DIR
or two jobs' tokens (e.g. vLLM with the seeded weights against the native engine on the same shape):
    python benchmarks/compare_tokens.py --against REFERENCE_JOB_DIR JOB_DIR
Each job (parallel=dp/tp/pp) prints its layout and decode mode, the KV-cache-vs-recompute
mismatches it counted (workload.verify=true: the reference path is eager, without the cache) and
whether its tokens equal the first finished job's."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def layout(job: Path) -> str:
    overrides = (job / ".hydra" / "overrides.yaml").read_text()
    name = overrides.split("parallel=")[1].split()[0] if "parallel=" in overrides else "default"
    results = job / "results.json"
    mode = json.loads(results.read_text())["tags"].get("decode_mode", "eager") if results.exists() else "?"
    return f"{name} ({mode})"


def main(sweep: Path) -> None:
    jobs = sorted(sweep.glob("[0-9]*"), key=lambda p: int(p.name))
    finished = [j for j in jobs if (j / "results.json").exists()]
    reference = json.loads((finished[0] / "generated_tokens.json").read_text()) if finished else None
    for job in jobs:
        if job not in finished:
            print(f"{layout(job)} FAILED: see {job / 'worker.log'}")
            continue
        metrics = json.loads((job / "results.json").read_text())["metrics"]
        same = json.loads((job / "generated_tokens.json").read_text()) == reference
        print(f"{layout(job)} KV-cache decode vs recompute: {metrics['decode_mismatched_tokens']:.0f} mismatched "
              f"tokens; tokens {'==' if same else '!='} {layout(finished[0])}'s")


def tokens(job: Path) -> list[list[int]]:
    return json.loads((job / "generated_tokens.json").read_text())


def compare_jobs(reference: Path, job: Path) -> None:
    """Requests decoded identically, tokens equal position by position, and where each request first differs."""
    ref, got = tokens(reference), tokens(job)
    first = [next((i for i, (a, b) in enumerate(zip(r, g)) if a != b), None) for r, g in zip(ref, got)]
    same = sum(a == b for r, g in zip(ref, got) for a, b in zip(r, g))
    total = sum(len(r) for r in ref)
    print(f"{job} against {reference}: {first.count(None)}/{len(ref)} requests identical, {same}/{total} tokens "
          f"equal ({100 * same / total:.1f} %); first differing position per request: {first}")


if __name__ == "__main__":
    if sys.argv[1] == "--against":
        compare_jobs(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        main(Path(sys.argv[1]))
