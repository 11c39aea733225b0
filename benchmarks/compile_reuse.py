"""What a compiled native decode costs per sweep point: an inference sweep with decode_mode=compile
run point after point into one compile cache, and per point whether its compiles hit the cache, the
warm-up batch (compile, CUDA-graph capture), the seconds from its first rank line to its first
measured batch, TPOT and MBU.

    python benchmarks/compile_reuse.py [--cache DIR] [--log FILE] [--out FILE] OVERRIDES...
    # e.g. on CPU:  hardware=cpu model=tiny model.layers=16 workload.input_len=20,28
    # on one GPU:   model=llama2_7b hardware.gpus_per_node=1 workload.batch_size=4 workload.input_len=64,128

--cache: the compile cache (default: a new empty folder, so the first point compiles); --log keeps
every console line with the seconds since the sweep started. `verify` is decode_mismatched_tokens
(workload.verify=true: the tokens against the eager recompute reference; nan: not verified)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import mlflow

from overhead import DONE, LAUNCH, RANK, timed_lines

MEASURING = "(measure)"  # rank 0's line as its first measured batch starts


def points_from_lines(lines: list[tuple[float, str]]) -> list[dict]:
    """Per point (in launch order): the first rank line and rank 0's first measured batch, in seconds
    since the sweep started."""
    points, current = [], None
    for t, text in lines:
        if LAUNCH.match(text):
            current = {"name": LAUNCH.match(text).group(1)}
        elif current and RANK.match(text):
            current.setdefault("first_rank", t)
            if RANK.match(text).group(1) == "0" and MEASURING in text:
                current.setdefault("measuring", t)
        elif current and DONE.match(text):
            points.append(current)
            current = None
    return points


def run_metrics(tracking: str) -> list[dict]:
    """The sweep's child runs, oldest first: what each recorded about its compiles and decoding."""
    mlflow.set_tracking_uri(tracking)
    runs = mlflow.search_runs(search_all_experiments=True, order_by=["start_time ASC"])
    runs = runs[runs["tags.mlflow.parentRunId"].notna()]
    get = lambda r, k: float(r.get(f"metrics.{k}", float("nan")))  # noqa: E731
    return [{"status": r["status"], "cache": r.get("tags.compile_cache"), "key": r.get("tags.compile_key"),
             "hits": get(r, "compile_cache_hits"), "misses": get(r, "compile_cache_misses"),
             "first_batch_s": get(r, "first_batch_s"), "build_s": get(r, "model_build_s"),
             "tpot_ms": 1000 * get(r, "tpot_s_p50"), "mbu_pct": 100 * get(r, "mbu"),
             "mismatched": get(r, "decode_mismatched_tokens")} for _, r in runs.iterrows()]


def print_table(rows: list[dict]) -> None:
    print(f"\n{'point':40s} {'status':>8s} {'cache':>7s} {'hit/miss':>8s} {'build':>6s} {'1st batch':>9s} {'rank->meas':>10s} "
          f"{'TPOT ms':>8s} {'MBU %':>6s} {'verify':>6s}  key")
    for r in rows:
        print(f"{r['name'][:40]:40s} {r['status']:>8s} {str(r['cache']):>7s} {r['hits']:3.0f}/{r['misses']:<4.0f} {r['build_s']:6.2f} "
              f"{r['first_batch_s']:9.2f} {r['rank_to_measuring_s']:10.2f} {r['tpot_ms']:8.3f} {r['mbu_pct']:6.1f} "
              f"{r['mismatched']:6.0f}  {r['key']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, help="compile cache folder (default: a new empty one)")
    parser.add_argument("--log", type=Path, help="write the timed console lines here")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument("--root", type=Path, help="the sweep's folder and MLflow store (default: a new temporary one)")
    args, overrides = parser.parse_known_args()
    root = (args.root or Path(tempfile.mkdtemp(prefix="parbench_compile_reuse_"))).resolve()
    root.mkdir(parents=True, exist_ok=True)
    tracking = f"sqlite:///{root}/mlflow.db"
    cmd = [sys.executable, "-m", "parbench", "-m", "workload=inference", "workload.decode_mode=compile",
           f"compile_cache={(args.cache or root / 'compile_cache').resolve()}", "resume=false",
           "workload.profile=false", f"tracking.uri={tracking}", f"hydra.sweep.dir={root}/sweep", *overrides]
    print("$", " ".join(cmd), flush=True)
    lines, wall = timed_lines(cmd, Path.cwd(), check=False)  # a failed point still gets its row
    if args.log:
        args.log.write_text("".join(f"{t:.3f}\t{text}\n" for t, text in lines))
    rows = [{**point, **run, "rank_to_measuring_s": point.get("measuring", float("nan")) - point["first_rank"]}
            for point, run in zip(points_from_lines(lines), run_metrics(tracking))]
    print_table(rows)
    print(f"sweep wall {wall:.1f} s")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
