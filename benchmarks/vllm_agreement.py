"""parbench's vLLM TTFT and TPOT against vLLM's own LLM.generate timings on the same shape, one engine:
    python benchmarks/vllm_agreement.py OUT_DIR [parbench overrides ...]
e.g. OUT_DIR model=llama3_2_1b hardware.gpus_per_node=1 workload.input_len=1024 workload.batch_size=16
     workload.output_len=128 workload.repeats=10
One vLLM engine in this process, built as a parbench run builds it (the resolved config of
`workload=inference workload.engine=vllm <overrides>`, the worker's build_llm), then workload.warmup
unrecorded and workload.repeats recorded rounds on batches 0, 1, ...; each round, on one batch:
  A. parbench's measurement (the worker's timed_batch: TTFT and TPOT per request from vLLM's request
     stats, the batch's p50 from latency_metrics);
  B. vLLM's `vllm bench latency` way: the wall clock around llm.generate, with max_tokens=1 (TTFT) and
     with output_len tokens (E2E), each the median of WALL_CLOCK_PAIRS alternating calls (TPOT is their
     difference, which one noisy pair can turn negative); TPOT = (E2E - TTFT) / (output_len - 1).
A and B alternate, so a drift of the engine's speed over the run falls on both; each round gives a
paired difference (A - B) / B. Prints parbench's p50 over all rounds against B's median, and the
paired differences' median with its spread (the median's interval over rounds, stats.confidence):
a difference whose interval holds 0 is noise. Writes OUT_DIR/agreement.json; exit 1 when the median
paired difference of TTFT or TPOT exceeds 3 % (AGREEMENT_TOLERANCE_PCT)."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

from parbench.config.hardware import detect_gpus
from parbench.config.resolve import RESOLVED_FILE, save
from parbench.config.schema import Config
from parbench.metrics.timing import median_ci_order
from parbench.planner import compose_config
from parbench.workloads.inference.latency import latency_metrics
from parbench.workloads.inference.vllm_engine.run import (batch_prompts, build_llm, import_vllm, prepare_model,
                                                          resolved_weights, sampling, set_vllm_env, timed_batch)

TOLERANCE_PCT = float(os.environ.get("AGREEMENT_TOLERANCE_PCT", "3"))
NAMES = ("ttft_s", "tpot_s", "e2e_s")
CHECKED = ("ttft_s", "tpot_s")
WALL_CLOCK_PAIRS = 3


def start_engine(cfg: Config, out: Path):
    """The vLLM engine of a parbench run of `cfg`, its model files under `out`."""
    set_vllm_env(cfg)
    weights = resolved_weights(cfg)
    return build_llm(cfg, prepare_model(cfg, weights, out), weights, out)


def wall_s(llm, prompts: list[dict], params) -> float:
    start = time.perf_counter()
    llm.generate(prompts, params, use_tqdm=False)
    return time.perf_counter() - start


def one_round(cfg: Config, llm, vllm, index: int) -> dict:
    """A then B on batch `index`: the batch, parbench's p50s of it, vLLM's first_token_latency p50, the wall clock."""
    w = cfg.workload
    batch, outputs = timed_batch(cfg, llm, sampling(vllm, w.output_len), index)
    figures = latency_metrics([batch], w.output_len, cfg.stats.confidence)
    prompts = batch_prompts(cfg, index)
    pairs = [(wall_s(llm, prompts, sampling(vllm, 1)), wall_s(llm, prompts, sampling(vllm, w.output_len)))
             for _ in range(WALL_CLOCK_PAIRS)]
    ttft, e2e = (statistics.median(times) for times in zip(*pairs))
    if e2e <= ttft:
        raise SystemExit(f"vllm_agreement: generating {w.output_len} tokens took no longer than 1 "
                         f"({1e3 * e2e:.2f} <= {1e3 * ttft:.2f} ms), so the wall clock gives no TPOT: raise "
                         "workload.output_len")
    return {"batch": batch, "parbench": {n: figures[f"{n}_p50"] for n in NAMES},
            "first_token_latency": statistics.median(o.metrics.first_token_latency for o in outputs),
            "vllm_generate": {"ttft_s": ttft, "tpot_s": (e2e - ttft) / (w.output_len - 1), "e2e_s": e2e}}


def agreement(cfg: Config, llm) -> dict:
    """workload.warmup unrecorded rounds, then workload.repeats rounds: per metric, parbench's p50
    over all rounds' requests, the wall clock's median over rounds, and the paired differences."""
    vllm, w = import_vllm(), cfg.workload
    for i in range(w.warmup):
        one_round(cfg, llm, vllm, i)
    rounds = [one_round(cfg, llm, vllm, w.warmup + i) for i in range(w.repeats)]
    overall = latency_metrics([r["batch"] for r in rounds], w.output_len, cfg.stats.confidence)
    metrics = {}
    for name in NAMES:
        diffs = [100 * (r["parbench"][name] / r["vllm_generate"][name] - 1) for r in rounds]
        low, high, level = median_ci_order(diffs, cfg.stats.confidence)
        metrics[name] = {"parbench_p50": overall[f"{name}_p50"],
                         "vllm_generate_median": statistics.median(r["vllm_generate"][name] for r in rounds),
                         "diff_pct_median": statistics.median(diffs), "diff_pct_ci": [low, high, level],
                         "diff_pct_rounds": diffs,
                         "parbench_rounds": [r["parbench"][name] for r in rounds],
                         "vllm_generate_rounds": [r["vllm_generate"][name] for r in rounds]}
    # vLLM's own TTFT (from each request's arrival stamp, taken as generate renders its prompt): what
    # parbench reported before counting from the batch's submission
    metrics["ttft_s"]["first_token_latency_rounds"] = [r["first_token_latency"] for r in rounds]
    return metrics


def report(metrics: dict) -> float:
    """The figures in words; returns the worst median paired difference of TTFT and TPOT, in %."""
    for name, m in metrics.items():
        low, high, level = m["diff_pct_ci"]
        print(f"{name:7s} parbench p50 {1e3 * m['parbench_p50']:9.3f} ms   LLM.generate wall clock "
              f"{1e3 * m['vllm_generate_median']:9.3f} ms   paired difference {m['diff_pct_median']:+6.2f} % "
              f"({100 * level:.1f} % interval {low:+.2f} .. {high:+.2f} %, rounds "
              f"{' '.join(f'{d:+.1f}' for d in m['diff_pct_rounds'])})")
    ttft = metrics["ttft_s"]
    own = [100 * (a / b - 1) for a, b in zip(ttft["first_token_latency_rounds"], ttft["vllm_generate_rounds"])]
    print(f"(vLLM's first_token_latency, from each request's arrival: p50 "
          f"{1e3 * statistics.median(ttft['first_token_latency_rounds']):.3f} ms, paired difference "
          f"{statistics.median(own):+.2f} %)")
    worst = max(abs(metrics[n]["diff_pct_median"]) for n in CHECKED)
    print(f"TTFT and TPOT agree within {worst:.2f} % (tolerance {TOLERANCE_PCT} %)")
    return worst


def main(out: Path, overrides: list[str]) -> int:
    cfg = compose_config(["workload=inference", "workload.engine=vllm", *overrides], detect_gpus())
    if cfg.workload.output_len < 2 or cfg.workload.repeats < 1:
        raise SystemExit("vllm_agreement: TPOT needs workload.output_len >= 2 and rounds workload.repeats >= 1")
    out.mkdir(parents=True, exist_ok=True)
    save(cfg, out / RESOLVED_FILE)
    metrics = agreement(cfg, start_engine(cfg, out))
    worst = report(metrics)
    (out / "agreement.json").write_text(json.dumps({"overrides": overrides, "rounds": cfg.workload.repeats,
                                                    "tolerance_pct": TOLERANCE_PCT, "metrics": metrics}, indent=1))
    return 0 if worst <= TOLERANCE_PCT else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve(), sys.argv[2:]))
