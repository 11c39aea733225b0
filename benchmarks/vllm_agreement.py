"""parbench's vLLM TTFT and TPOT against vLLM's own LLM.generate timings on the same shape, in one call:
    python benchmarks/vllm_agreement.py OUT_DIR [parbench overrides ...]
e.g. OUT_DIR model=llama3_2_1b workload.input_len=1024 workload.batch_size=8 workload.output_len=128
1. `python -m parbench workload=inference workload.engine=vllm <overrides>` (job dir OUT_DIR/parbench):
   its ttft_s_p50 and tpot_s_p50 come from vLLM's per-request stats (RequestOutput.metrics).
2. The same engine (parbench's build_llm on that run's resolved config, so every vLLM setting is the
   same) in this process, timed as vLLM's own `vllm bench latency` times it: the wall clock around
   llm.generate, once with max_tokens=1 (TTFT: the batch's prefill) and once with output_len tokens
   (E2E); TPOT = (E2E - TTFT) / (output_len - 1). Medians over workload.repeats after one warm-up.
Prints both and their differences, writes OUT_DIR/agreement.json; exit 1 when one differs by more
than 3 % (AGREEMENT_TOLERANCE_PCT)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from parbench.config.resolve import RESOLVED_FILE
from parbench.paths import RESULTS_FILE
from parbench.workloads.inference.vllm_engine.run import (HF_MODEL_DIR, batch_prompts, build_llm, resolved_weights,
                                                          sampling, set_vllm_env)
from parbench.workloads.registry import load_config

TOLERANCE_PCT = float(os.environ.get("AGREEMENT_TOLERANCE_PCT", "3"))


def run_parbench(job_dir: Path, overrides: list[str]) -> dict:
    cmd = [sys.executable, "-m", "parbench", "workload=inference", "workload.engine=vllm", *overrides,
           f"hydra.run.dir={job_dir}"]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return json.loads((job_dir / RESULTS_FILE).read_text())["metrics"]


def generate_s(llm, prompts: list[dict], params) -> float:
    start = time.perf_counter()
    llm.generate(prompts, params, use_tqdm=False)
    return time.perf_counter() - start


def vllm_own_timings(job_dir: Path) -> dict:
    """TTFT and TPOT of the run's shape from wall-clock llm.generate, as vLLM's latency benchmark."""
    cfg = load_config(job_dir / RESOLVED_FILE)
    set_vllm_env(cfg)
    import vllm

    w = cfg.workload
    llm = build_llm(cfg, str(job_dir / HF_MODEL_DIR), resolved_weights(cfg), job_dir / "reference")
    first, full = sampling(vllm, 1), sampling(vllm, w.output_len)
    prompts = batch_prompts(cfg, 0)
    generate_s(llm, prompts, first), generate_s(llm, prompts, full)  # warm-up
    ttft = statistics.median(generate_s(llm, batch_prompts(cfg, i), first) for i in range(w.repeats))
    e2e = statistics.median(generate_s(llm, batch_prompts(cfg, i), full) for i in range(w.repeats))
    return {"ttft_s_p50": ttft, "tpot_s_p50": (e2e - ttft) / (w.output_len - 1), "e2e_s_p50": e2e}


def main(out: Path, overrides: list[str]) -> int:
    job_dir = out / "parbench"
    parbench = run_parbench(job_dir, overrides)
    own = vllm_own_timings(job_dir)
    rows = {name: {"parbench": parbench[name], "vllm_generate": own[name],
                   "diff_pct": 100 * (parbench[name] - own[name]) / own[name]} for name in own}
    (out / "agreement.json").write_text(json.dumps({"overrides": overrides, "metrics": rows}, indent=1))
    for name, row in rows.items():
        print(f"{name:11s} parbench {1e3 * row['parbench']:9.3f} ms   vLLM LLM.generate {1e3 * row['vllm_generate']:9.3f} ms"
              f"   {row['diff_pct']:+6.2f} %")
    worst = max(abs(rows[n]["diff_pct"]) for n in ("ttft_s_p50", "tpot_s_p50"))
    print(f"TTFT and TPOT agree within {worst:.2f} % (tolerance {TOLERANCE_PCT} %)")
    return 0 if worst <= TOLERANCE_PCT else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve(), sys.argv[2:]))
