"""How close the performance model (parbench.predict) comes to measured runs on this GPU machine.
Each case runs through the real CLI and its measured metrics are appended to a JSON-lines file as
it ends (a cut-short call keeps what finished, and a call on the same file measures only the cases
it does not hold yet); the table sets the model's prediction of the same
config, with the named calibration profile, beside them, so it can be made again from the file.

    python benchmarks/predictor_accuracy.py measure --jsonl runs.jsonl [--cases train,infer] [--models M,..] [--budget-s S] [overrides...]
    python benchmarks/predictor_accuracy.py table --jsonl runs.jsonl [--calibration FILE] [--out table.md]

Cases (issue 31): llama3_2_1b, qwen3_1_7b and gpt2_xl on one GPU, sequences 1024 to 8192, eager
and compiled, checkpointing none, selective and full (none of them a calibration run's shape); the
native inference engine at batch 1 to 32. Goal: median |error| <= 10 % for step time and peak
memory, none worse than 25 %, and the case the model ranks first among the layouts of one model
and batch (`rank` cases) within 5 % of the fastest measured; TTFT and TPOT within 10 %. `train2`: the
strategies on two GPUs of one host (`measure --cases train2`). `unseen_train` and `unseen_infer`: shapes
no fit and no table before 2026-11-29 had seen, measured once after a change to check that it generalises
(GPT-2 XL above all, whose kernels differ most from the calibration model's); `unseen_replay`: eager checkpointed
steps of each family at new shapes, measured after the replay's host cost changed (2026-11-29); `unseen_scale`: larger
models, batches and decodes than any list (a 7B's training step, Mixtral 8x7B's inference; 2026-11-29)."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from parbench.fmt import format_metric
from parbench.prepare import validate
from parbench.planner import compose_config
from parbench.predict import predict
from parbench.predict.calibration_file import load_calibration
from parbench.predict.profiles import calibration_for
from parbench.predict.inference import predict_inference

ONE_GPU = ["hardware.gpus_per_node=1", "parallel=dp"]
TRAIN = [*ONE_GPU, "workload=train", "workload.steps=8", "workload.warmup_steps=3", "profile.enabled=false"]
# Two GPUs of one host under each strategy (not issue 31's list): the 1B Llama device-bound, the tiny model host-bound,
# where an eager strategy's wrappers (DTensor, FSDP2's hooks) cost the host per dispatch
TRAIN2 = [o for o in TRAIN if o not in ONE_GPU] + ["hardware.gpus_per_node=2"]
INFER = [*ONE_GPU, "workload=inference", "workload.output_len=64", "workload.repeats=3", "workload.profile=false"]
RANK = ["model=llama3_2_1b", "workload.seq_len=4096", "workload.batch_size=2"]  # one model and batch, four layouts
# The CPU's cases: the tiny model on the default 2 ranks (gloo) under each strategy, and on one rank
CPU_TRAIN = ["hardware=cpu", "model=tiny", "workload=train", "workload.steps=20", "workload.warmup_steps=3",
             "profile.enabled=false"]
CPU_INFER = ["hardware=cpu", "model=tiny", "workload=inference", "workload.repeats=5", "workload.profile=false"]


def train(model: str, seq: int, batch: int, compiled: bool, ac: str, *extra: str) -> list[str]:
    return [*TRAIN, f"model={model}", f"workload.seq_len={seq}", f"workload.batch_size={batch}",
            f"workload.compile={str(compiled).lower()}", f"workload.activation_checkpointing={ac}", *extra]


def infer(model: str, batch: int, input_len: int, output_len: int = 64) -> list[str]:
    base = [o for o in INFER if not o.startswith("workload.output_len=")]
    return [*base, f"model={model}", f"workload.input_len={input_len}", f"workload.batch_size={batch}",
            f"workload.output_len={output_len}"]


CASES = {
    "train": [
        train("llama3_2_1b", 4096, 2, False, "none"), train("llama3_2_1b", 4096, 2, True, "none"),
        train("llama3_2_1b", 4096, 2, False, "selective"), train("llama3_2_1b", 4096, 2, True, "full"),
        train("qwen3_1_7b", 2048, 2, False, "full"), train("gpt2_xl", 1024, 4, False, "none"),
        train("qwen3_1_7b", 8192, 1, True, "selective"),
        train("gpt2_xl", 2048, 4, True, "full", "model.max_seq_len=2048"),
        train("llama3_2_1b", 1024, 8, False, "full"), train("qwen3_1_7b", 4096, 2, True, "none"),
        # the Qwen3 full-checkpointing case's shape without checkpointing, and the 1B Llama at it:
        # which of family and checkpointing its error follows
        train("qwen3_1_7b", 2048, 2, False, "none"), train("llama3_2_1b", 2048, 2, False, "full"),
        # added after the profiles were fitted (2026-11-25): modes and lengths on models that no
        # calibration run has
        train("gpt2_xl", 1024, 4, False, "full"), train("llama3_2_1b", 8192, 1, True, "selective"),
        train("qwen3_1_7b", 4096, 1, False, "selective"),
    ],
    "infer": [infer(m, b, n)
              for m, b, n in (("llama3_2_1b", 1, 512), ("llama3_2_1b", 32, 512), ("qwen3_1_7b", 8, 512), ("gpt2_xl", 4, 512),
                              # added with the prefill graph (2026-11-26): other lengths and batches, and the
                              # graph's largest prefill (8192 tokens)
                              ("llama3_2_1b", 4, 2048), ("qwen3_1_7b", 1, 1024), ("gpt2_xl", 1, 512),
                              ("llama3_2_1b", 16, 512))],
    "unseen_train": [train("gpt2_xl", 2048, 2, False, "selective", "model.max_seq_len=2048"),
                     train("gpt2_xl", 1024, 8, True, "none"), train("gpt2_xl", 512, 8, False, "none"),
                     train("llama3_2_1b", 2048, 4, False, "none"), train("qwen3_1_7b", 1024, 8, True, "full")],
    "unseen_infer": [infer(m, b, n)
                     for m, b, n in (("gpt2_xl", 32, 512), ("gpt2_xl", 16, 768), ("qwen3_1_7b", 16, 1024),
                                     ("llama3_2_1b", 8, 4096))],
    # short prompts, 64-256 tokens a sequence, where a prefill's kernels are short and their fixed costs count (2026-11-29)
    "unseen_short": [infer(m, b, n)
                     for m, b, n in (("gpt2_xl", 1, 128), ("llama3_2_1b", 1, 128), ("qwen3_1_7b", 1, 128),
                                     ("llama3_2_1b", 2, 64), ("gpt2_xl", 8, 128), ("qwen3_1_7b", 4, 256))],
    # eager checkpointed steps of each family at shapes on no list, measured after the replay's host cost became a
    # cost per layer and per call (2026-11-29): the host's share of these steps is what they check
    "unseen_replay": [train("qwen3_1_7b", 2048, 2, False, "selective"), train("gpt2_xl", 512, 8, False, "full"),
                      train("llama3_2_1b", 2048, 4, False, "selective"), train("qwen3_1_7b", 1024, 4, False, "full"),
                      train("gpt2_xl", 1024, 2, False, "selective"), train("llama3_2_1b", 4096, 1, False, "full")],
    # models no calibration run and no list has (2026-11-29): 7-8B dense models' inference (hidden 4096, MHA and GQA)
    # and the 2.5B MoE's; the MoE's training steps, eager and compiled
    "unseen_models": [infer(m, b, n)
                      for m, b, n in (("llama2_7b", 1, 512), ("llama3_8b", 8, 1024), ("qwen3_8b", 4, 512),
                                      ("moe_2_5b", 4, 512), ("llama2_7b", 16, 256))],
    "unseen_moe": [train("moe_2_5b", 2048, 2, False, "none"), train("moe_2_5b", 1024, 4, False, "selective"),
                   train("moe_2_5b", 2048, 2, True, "none")],
    # larger models, batches and decodes than any list before (2026-11-29, session 19): a 7B's training step on one GPU,
    # 16k tokens a step, a 512-token decode, 13B and 47B (Mixtral, 8 experts) inference, an 8000-token prompt
    "unseen_scale": [train("llama3_2_1b", 1024, 16, False, "none"), train("qwen3_1_7b", 8192, 1, False, "full"),
                     train("gpt2_xl", 1024, 16, True, "selective"), train("llama3_2_1b", 2048, 1, True, "none"),
                     train("llama2_7b", 1024, 1, False, "full"), train("qwen3_1_7b", 2048, 4, True, "full"),
                     infer("llama3_2_1b", 8, 512, 512), infer("qwen3_8b", 2, 4096), infer("llama2_13b", 4, 512),
                     infer("gpt2_xl", 2, 960), infer("llama3_8b", 1, 8000), infer("mixtral_8x7b", 1, 256),
                     # after the grouped roofline (the same session): the MoEs' decode of few tokens and more
                     infer("moe_2_5b", 1, 512), infer("mixtral_8x7b", 4, 256), infer("mixtral_8x7b", 16, 512)],
    "train2": [[*TRAIN2, f"parallel={p}", *shape] for shape in (["model=llama3_2_1b", "workload.seq_len=2048", "workload.batch_size=4"],
                                                                 ["model=tiny", "workload.seq_len=256", "workload.batch_size=4"])
               for p in ("dp", "fsdp", "tp", "sp", "cp")],
    "cpu_train": [[*CPU_TRAIN, f"parallel={p}"] for p in ("dp", "fsdp", "tp", "pp", "cp")] + [
        [*CPU_TRAIN, "parallel=dp", "workload.activation_checkpointing=full"],
        [*CPU_TRAIN, "parallel=dp", "workload.activation_checkpointing=selective", "workload.seq_len=256"],
        [*CPU_TRAIN, "parallel=dp", "hardware.gpus_per_node=1", "model.layers=8", "workload.batch_size=8"]],
    "cpu_infer": [[*CPU_INFER, f"workload.batch_size={b}", f"workload.input_len={n}"] for b, n in ((1, 64), (8, 128))],
}
# The order they run in: a call that runs out of time has measured a spread of them.
ORDER = ("train:0", "train:1", "infer:0", "train:4", "train:5", "train:10", "train:11", "train:2", "train:3", "infer:1",
         "train:6", "train:7", "infer:2", "train:8", "train:9", "train:12", "infer:3", "train:13", "train:14",
         "infer:4", "infer:5", "infer:6", "infer:7",
         *(f"unseen_{kind}:{i}" for kind in ("train", "infer", "replay", "short", "models", "moe", "scale")
           for i in range(len(CASES[f"unseen_{kind}"]))),
         *(f"train2:{i}" for i in range(len(CASES["train2"]))),
         *(f"{kind}:{i}" for kind in ("cpu_train", "cpu_infer") for i in range(len(CASES[kind]))))


BASES = {"train": TRAIN, "train2": TRAIN2, "infer": INFER, "unseen_train": TRAIN, "unseen_infer": INFER,
         "unseen_replay": TRAIN, "unseen_short": INFER,
         "unseen_models": INFER, "unseen_moe": TRAIN,
         "unseen_scale": TRAIN + INFER, "cpu_train": CPU_TRAIN, "cpu_infer": CPU_INFER}


def is_inference(overrides: list[str]) -> bool:
    return "workload=inference" in overrides


def measure(overrides: list[str], job_dir: Path, uri: str) -> dict | None:
    cmd = [sys.executable, "-m", "parbench", *overrides, f"hydra.run.dir={job_dir}", f"tracking.uri={uri}"]
    print("$ python -m parbench " + " ".join(overrides), flush=True)
    if subprocess.run(cmd).returncode:
        return None
    return json.loads((job_dir / "results.json").read_text())["metrics"]


# A training case whose step times spread wider than this (p90 over p10) measured a disturbed run,
# not the config: a continued call measures it again, and the table takes the later record.
SPREAD_LIMIT = 1.15


def steady(metrics: dict) -> bool:
    low, high = metrics.get("step_time_s_p10"), metrics.get("step_time_s_p90")
    return not (low and high) or high / low <= SPREAD_LIMIT


def all_records(jsonl: Path) -> dict[tuple, list[dict]]:
    """The file's records by case, in the order they were measured."""
    lines = jsonl.read_text().splitlines() if jsonl.exists() else []
    cases: dict[tuple, list[dict]] = {}
    for r in map(json.loads, filter(str.strip, lines)):
        cases.setdefault(tuple(sorted(r["overrides"])), []).append(r)
    return cases


def records(jsonl: Path) -> list[dict]:
    """Each case's latest record with metrics (a failed re-measure keeps the earlier), else its last."""
    return [next((r for r in reversed(rs) if r["metrics"]), rs[-1]) for rs in all_records(jsonl).values()]


def measured_before(jsonl: Path) -> list[list[str]]:
    """The overrides of the cases a continued call skips: measured steadily, or unsteadily twice
    (a case that is unsteady on this machine is not measured again and again)."""
    done = []
    for rs in all_records(jsonl).values():
        measured = [r for r in rs if r["metrics"]]
        if measured and (steady(measured[-1]["metrics"]) or len(measured) > 1):
            done.append(rs[-1]["overrides"])
    return done


def measure_all(kinds: list[str], extra: list[str], jsonl: Path, budget_s: float, models: list[str]) -> None:
    """Each case not in the file yet, in ORDER (of `models` where given), as long as one more fits in the budget (a
    case's time is taken as the longest so far)."""
    done, start, longest = measured_before(jsonl), time.monotonic(), 0.0
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{tmp}/mlflow.db"
        for key in ORDER:
            kind, i = key.split(":")
            overrides = [*CASES[kind][int(i)], *extra]
            if kind not in kinds or any(sorted(overrides) == sorted(d) for d in done) or (
                    models and not any(f"model={m}" in overrides for m in models)):
                continue
            if time.monotonic() - start + longest > budget_s:
                print(f"budget of {budget_s:.0f} s spent: {key} and the cases after it are left for the next call")
                return
            case_start = time.monotonic()
            metrics = measure(overrides, Path(tmp) / key.replace(":", "_"), uri)
            with jsonl.open("a") as f:
                f.write(json.dumps({"kind": kind, "overrides": overrides, "metrics": metrics}) + "\n")
            longest = max(longest, time.monotonic() - case_start)


def error_pct(predicted: float, measured: float) -> float:
    return 100 * (predicted - measured) / measured


def label(kind: str, overrides: list[str]) -> str:
    """The case's overrides beyond its kind's common ones."""
    shown = [o.split("=", 1)[1] if o.startswith("model=") else o.removeprefix("workload.") for o in overrides
             if o not in BASES[kind] and not o.startswith("hardware=")]
    return " ".join(shown).replace("activation_checkpointing=", "ac=").replace("batch_size=", "batch=")


def row(kind: str, overrides: list[str], measured: dict, cal_ref: str | None) -> dict:
    cfg = compose_config(overrides)
    dims = validate(cfg, None)
    cal = load_calibration(cal_ref) if cal_ref else calibration_for(cfg.hardware, cfg.workload.dtype, None)
    if is_inference(overrides):
        p = predict_inference(cfg, dims, cal)
        return {"kind": kind, "case": label(kind, overrides), "calibration": p.calibration,
                "a": ("TTFT", p.ttft_s, measured["ttft_s_p50"]), "b": ("TPOT", p.tpot_s, measured["tpot_s_p50"])}
    p = predict(cfg, dims, cal)
    # a step the model has waiting on the host's dispatch moves with the host it runs on, not only the GPU
    case = label(kind, overrides) + (" (host-bound)" if p.host_bound else "")
    return {"kind": kind, "case": case, "calibration": p.calibration, "rank": all(o in overrides for o in RANK),
            "a": ("step", p.step_time_s, measured["step_time_s"]),
            "b": ("peak", p.memory.total_gb, measured["mem_peak_allocated_gb"])}


def cell(name: str, value: float) -> str:
    return format_metric("gb" if name == "peak" else "s", value)


def markdown(rows: list[dict]) -> str:
    lines = ["| case | predicted | measured | error | predicted | measured | error |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [f"{r['case']}"]
        for part in ("a", "b"):
            name, p, m = r[part]
            cells += [f"{name} {cell(name, p)}", cell(name, m), f"{error_pct(p, m):+.1f} %"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", *summary(rows), "", f"calibration: {rows[0]['calibration']}"])


def summary(rows: list[dict]) -> list[str]:
    lines = []
    for kind, first in dict.fromkeys((r["kind"], r["a"][0]) for r in rows):  # a kind may hold steps and inference
        kind_rows = [r for r in rows if (r["kind"], r["a"][0]) == (kind, first)]
        for part in ("a", "b"):
            errors = [abs(error_pct(*r[part][1:])) for r in kind_rows]
            what = {"step": "step time", "peak": "peak memory"}.get(kind_rows[0][part][0], kind_rows[0][part][0])
            lines.append(f"- {kind} {what}: median |error| {statistics.median(errors):.1f} %, worst {max(errors):.1f} % "
                         f"({len(errors)} cases)")
    ranked = [r for r in rows if r.get("rank")]
    if len(ranked) > 1:
        picked = min(ranked, key=lambda r: r["a"][1])
        best = min(ranked, key=lambda r: r["a"][2])
        lines.append(f"- the model's pick among the {len(ranked)} layouts of {' '.join(RANK)} ({picked['case']}) "
                     f"measures {best['a'][2] / picked['a'][2]:.1%} of the fastest measured ({best['case']})")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("measure", "table"))
    parser.add_argument("--jsonl", type=Path, required=True, help="measured cases, one JSON line each")
    parser.add_argument("--cases", default="train,infer", help="comma list of: " + ", ".join(CASES))
    parser.add_argument("--calibration", help="profile to predict with (default: the hardware's, as a run finds it)")
    parser.add_argument("--out", type=Path, help="markdown table (for docs/results/)")
    parser.add_argument("--budget-s", type=float, default=float("inf"),
                        help="measure: start no case that would end past this many seconds")
    parser.add_argument("--models", help="measure: only the cases of these models (comma list)")
    parser.add_argument("overrides", nargs="*", help="added to every case, e.g. hardware=h200")
    args = parser.parse_intermixed_args()
    if args.action == "measure":
        measure_all(args.cases.split(","), args.overrides, args.jsonl, args.budget_s, args.models.split(",") if args.models else [])
        return
    cases = records(args.jsonl)
    rows = [row(r["kind"], r["overrides"], r["metrics"], args.calibration) for r in cases if r["metrics"]]
    failed = [label(r["kind"], r["overrides"]) for r in cases if not r["metrics"]]
    unsteady = [label(r["kind"], r["overrides"]) for r in cases if r["metrics"] and not steady(r["metrics"])]
    text = markdown(rows) + "".join(f"\nfailed (left out): {f}" for f in failed) + "".join(
        f"\nunsteady (step times p90/p10 > {SPREAD_LIMIT}; measure again): {u}" for u in unsteady)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
