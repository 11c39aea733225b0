"""benchmarks/predictor_accuracy.py keeps the latest record of a case and measures a disturbed one again."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).parents[2]


def load_benchmark():
    spec = importlib.util.spec_from_file_location("predictor_accuracy", ROOT / "benchmarks" / "predictor_accuracy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def step_metrics(p10: float, p90: float) -> dict:
    return {"step_time_s": (p10 + p90) / 2, "step_time_s_p10": p10, "step_time_s_p90": p90}


def test_an_unsteady_case_is_measured_again_and_its_later_record_counts(tmp_path):
    bench = load_benchmark()
    steady_case, noisy_case = bench.CASES["train"][0], bench.CASES["train"][4]
    jsonl = tmp_path / "cases.jsonl"
    lines = [{"kind": "train", "overrides": steady_case, "metrics": step_metrics(0.18, 0.19)},
             {"kind": "train", "overrides": noisy_case, "metrics": step_metrics(0.235, 0.332)}]
    jsonl.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert bench.measured_before(jsonl) == [steady_case]  # the noisy one is measured again
    with jsonl.open("a") as f:
        f.write(json.dumps({"kind": "train", "overrides": list(reversed(noisy_case)),
                            "metrics": step_metrics(0.22, 0.23)}) + "\n")
    latest = bench.records(jsonl)
    assert len(latest) == 2 and latest[1]["metrics"]["step_time_s_p10"] == 0.22
    assert sorted(map(sorted, bench.measured_before(jsonl))) == sorted([sorted(steady_case), sorted(noisy_case)])


def test_every_cpu_case_composes_and_reads_as_its_own_row():
    """The CPU cases (each strategy on the default ranks, checkpointing, one rank, the native engine) are
    valid configs, each labelled by what sets it apart, and a table row comes from a record of each."""
    bench = load_benchmark()
    cases = [(kind, overrides) for kind in ("cpu_train", "cpu_infer") for overrides in bench.CASES[kind]]
    labels = [bench.label(kind, overrides) for kind, overrides in cases]
    assert all(labels) and len(set(labels)) == len(labels)
    measured = {"step_time_s": 0.01, "mem_peak_allocated_gb": 0.35, "ttft_s_p50": 1e-3, "tpot_s_p50": 5e-4}
    rows = [bench.row(kind, overrides, measured, None) for kind, overrides in cases]
    assert [r["a"][0] for r in rows] == ["step"] * len(bench.CASES["cpu_train"]) + ["TTFT"] * len(bench.CASES["cpu_infer"])
    assert all(r["a"][1] > 0 and r["b"][1] > 0 for r in rows)


def test_the_two_gpu_cases_compose_and_the_shipped_h200_profile_costs_each_strategys_host():
    """Every strategy on two GPUs, the 1B Llama and the tiny model, is a valid config on two H200s with its own
    label; on the host-bound tiny model the shipped H200 profile's strategy figures (measured on two H200s)
    make each wrapped strategy's step longer than dp's, in the order of their figures (tp, sp's DTensor the most)."""
    bench = load_benchmark()
    cases = bench.CASES["train2"]
    labels = [bench.label("train2", overrides) for overrides in cases]
    assert len(set(labels)) == len(labels) == 10
    measured = {"step_time_s": 0.01, "mem_peak_allocated_gb": 0.1}
    tiny = {o.split("=")[1]: bench.row("train2", [*overrides, "hardware=h200"], measured, "h200")["a"][1]
            for overrides in cases if "model=tiny" in overrides for o in overrides if o.startswith("parallel=")}
    assert tiny["dp"] < tiny["cp"] < tiny["sp"] < tiny["tp"] and tiny["dp"] < tiny["fsdp"] < tiny["sp"]


def test_every_gpu_case_kind_reads_as_a_row_of_its_own_measure():
    """Each GPU kind's first case composes on one H200 and its row compares what its base measures: step time for
    the training kinds, TTFT for the inference ones (unseen_short's short prompts among them)."""
    bench = load_benchmark()
    measured = {"step_time_s": 0.2, "mem_peak_allocated_gb": 20.0, "ttft_s_p50": 3e-3, "tpot_s_p50": 2e-3}
    gpu_kinds = [kind for kind in bench.CASES if not kind.startswith("cpu_") and kind != "train2"]
    parts = {kind: bench.row(kind, [*bench.CASES[kind][0], "hardware=h200"], measured, "h200")["a"][0] for kind in gpu_kinds}
    assert parts == {kind: "TTFT" if bench.BASES[kind] is bench.INFER else "step" for kind in gpu_kinds}
    assert {kind for kind, part in parts.items() if part == "TTFT"} == {"infer", "unseen_infer", "unseen_short", "unseen_models"}
