"""A replayed prefill priced per kernel of its block structure (predict/kernel_census.py): the counts from the
calibration model's depths and one run of each other structure, and what a prediction takes from them."""

from dataclasses import replace

import pytest

from parbench.models import block_structure
from parbench.predict.calibration_file import load_calibration
from parbench.predict.inference import predict_inference
from parbench.predict.kernel_census import kernels_per_layer, priced_per_kernel
from parbench.prepare import validate
from conftest import compose

H200 = ["hardware=h200", "hardware.gpus_per_node=1", "workload=inference", "workload.batch_size=1", "workload.input_len=512"]


def model(name: str, layers: int):
    return compose(f"model={name}", f"model.layers={layers}").model


def test_each_structure_is_counted_beyond_what_runs_outside_the_layers():
    """The 1B's depths (4 and 16 layers: 67.6 and 252.4 kernels, as on an H200) fix its layer's 15.4 and the 6 outside
    the layers; GPT-2 at 8 layers then runs 12.2 a layer, Qwen3 15.25. Fewer than two depths count nothing."""
    depths = [(model("llama3_2_1b", 4), 67.6), (model("llama3_2_1b", 16), 252.4)]
    others = [(model("gpt2_xl", 8), 6.0 + 8 * 12.2), (model("qwen3_1_7b", 8), 6.0 + 8 * 15.25)]
    assert kernels_per_layer(depths, others) == pytest.approx({"llama/gqa": 15.4, "gpt2/mha": 12.2, "llama/gqa/qk_norm": 15.25})
    assert kernels_per_layer(depths[:1], others) == {}


def test_a_replayed_prefill_costs_per_kernel_of_its_structure_where_counted():
    """With the H200's replay figure (21.4 µs a layer of the 1B's 15.4 kernels): GPT-2 XL's 48 layers of 12.2 kernels
    cost 21.4 x 12.2 / 15.4 µs each, 0.21 ms less than per layer; the 1B is as before; a structure not counted (Llama
    2's grouped-less heads here) and a profile without counts keep the per-layer figure."""
    per_layer = load_calibration("h200")
    counted = {"llama/gqa": 15.4, "gpt2/mha": 12.2}
    per_kernel = priced_per_kernel(replace(per_layer, prefill_graph_host_s={"per_step": 47e-6, "per_layer": 21.4e-6}),
                                   counted, model("llama3_2_1b", 16))
    assert per_kernel.prefill_graph_host_s["per_kernel"] == pytest.approx(21.4e-6 / 15.4)
    plain = replace(per_kernel, prefill_kernels_per_layer={})

    def ttft(name: str, cal) -> float:
        cfg = compose(*H200, f"model={name}")
        return predict_inference(cfg, validate(cfg, None), cal).ttft_s

    assert ttft("gpt2_xl", plain) - ttft("gpt2_xl", per_kernel) == pytest.approx(48 * 21.4e-6 * (1 - 12.2 / 15.4))
    for same in ("llama3_2_1b", "llama2_7b"):
        assert ttft(same, per_kernel) == pytest.approx(ttft(same, plain)), same
    assert block_structure(compose("model=llama2_7b").model) not in counted


def test_without_the_calibration_models_count_the_replay_stays_per_layer():
    cal = replace(load_calibration("h200"), prefill_graph_host_s={"per_step": 47e-6, "per_layer": 21.4e-6})
    kept = priced_per_kernel(cal, {"gpt2/mha": 12.2}, model("llama3_2_1b", 16))
    assert kept.prefill_graph_host_s == cal.prefill_graph_host_s and kept.prefill_kernels_per_layer == {"gpt2/mha": 12.2}
    assert priced_per_kernel(cal, {}, None).prefill_graph_host_s == cal.prefill_graph_host_s
