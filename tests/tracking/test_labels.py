"""Run names a person can read, and numbers with their units (never 4.309e+04)."""

from __future__ import annotations

import itertools

import pytest
from conftest import compose

from parbench.fmt import format_metric
from parbench.prepare import validate
from parbench.tracking.labels import run_label


def label(*overrides: str) -> str:
    cfg = compose("hardware=cpu", *overrides)
    return run_label(cfg, validate(cfg, None), list(overrides), uses_model=True)


def test_the_default_run_is_named_by_model_layout_and_batch():
    assert label() == "tiny dp2 seq64 mbs4"


def test_a_six_point_sweep_over_two_keys_gets_six_short_names_naming_both():
    points = list(itertools.product(("parallel=dp", "parallel=fsdp", "parallel=tp"),
                                    ("workload.compile=false", "workload.compile=true")))
    names = [label(*point) for point in points]
    assert len(set(names)) == 6, names
    for (parallel, compile_), name in zip(points, names):
        assert f"{parallel.split('=')[1]}2" in name and f"compile={compile_.split('=')[1]}" in name
        assert len(name) < 60


def test_single_process_points_of_a_world_size_sweep_have_distinct_names():
    names = [label(f"parallel={p}", f"hardware.gpus_per_node={n}") for p in ("dp", "fsdp") for n in (1, 2)]
    assert names == ["tiny 1 rank seq64 mbs4", "tiny dp2 seq64 mbs4", "tiny 1 rank fsdp seq64 mbs4", "tiny fsdp2 seq64 mbs4"]


def test_inference_and_overridden_keys_show_their_leaf_names():
    assert label("workload=inference", "workload.input_len=32", "seed=3") == "tiny 1 rank inference in32 out16 bs4 seed=3"
    assert "lr=0.1" in label("workload.lr=0.1", "tracking.experiment=x")
    assert "experiment" not in label("tracking.experiment=x")


@pytest.mark.parametrize("name, value, text", [
    ("throughput_tokens_per_s", 43090.4, "43,090 tok/s"),
    ("output_tokens_per_s", 134.2, "134 tok/s"),
    ("step_time_s", 1.2345, "1.23 s"),
    ("step_time_s_p90", 0.0123, "12.3 ms"),
    ("tpot_s_p50", 0.00685, "6.85 ms"),
    ("ttft_s_p50", 0.000456, "456 µs"),
    ("comm_pct", 38.46, "38.5 %"),
    ("comm_pct_all_reduce", 7.25, "7.2 %"),
    ("overhead_pct_output_tokens_per_s", -20.2, "-20.2 %"),
    ("mfu", 0.3851, "38.5 %"),
    ("mem_peak_allocated_gb", 38.5, "38.5 GB"),
    ("busbw_gbps/all_reduce/1GiB", 325.4, "325 GB/s"),
    ("matmul_tflops", 785.3, "785 TFLOP/s"),
    ("energy_j", 12345.6, "12,346 J"),
    ("loss_final", 6.9312, "6.93"),
    ("wrong_elements", 0.0, "0"),
])
def test_known_figures_are_formatted_for_people(name, value, text):
    assert format_metric(name, value) == text
