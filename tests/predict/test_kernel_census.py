"""A replayed prefill priced per kernel of its block structure (predict/kernel_census.py): the counts from the
calibration model's depths and one run of each other structure, and what a prediction takes from them."""

from dataclasses import replace

import pytest

from parbench.config import ConfigError
from parbench.predict.calibration_file import load_calibration, save_calibration
from parbench.predict.inference import predict_inference
from parbench.predict.kernel_census import kernels_per_layer, priced_per_kernel
from parbench.prepare import validate
from conftest import compose

H200 = ["hardware=h200", "hardware.gpus_per_node=1", "workload=inference", "workload.batch_size=1", "workload.input_len=512"]


def model(name: str, layers: int):
    return compose(f"model={name}", f"model.layers={layers}").model


def test_each_structure_is_counted_beyond_what_runs_outside_the_layers():
    """The 1B's depths (4 and 16 layers: 71 and 263 kernels, as on an H200) fix its layer's 16.0 and the 7 outside the
    layers; GPT-2 at 8 layers (105 kernels) then runs 12.25 a layer, Qwen3 (136) 16.125, and two runs of one
    structure count their mean. Fewer than two depths count nothing."""
    depths = [(model("llama3_2_1b", 4), 71.0), (model("llama3_2_1b", 16), 263.0)]
    others = [(model("gpt2_xl", 8), 105.0), (model("qwen3_1_7b", 8), 136.0), (model("qwen3_1_7b", 4), 7.0 + 4 * 16.375)]
    assert kernels_per_layer(depths, others) == pytest.approx({"llama/gqa": 16.0, "gpt2/mha": 12.25, "llama/gqa/qk_norm": 16.25})
    assert kernels_per_layer(depths[:1], others) == {}


def test_a_replayed_prefill_costs_per_kernel_of_its_structure_where_counted():
    """With the H200's replay figure (21.4 µs a layer of the 1B's 16.0 kernels): GPT-2 XL's 48 layers of 12.25 kernels
    cost 21.4 x 12.25 / 16.0 µs each, 0.24 ms less than per layer; the 1B is as before; so are a structure not counted
    (Llama 2's, here), a prefill of blocks not compiled (the counts are compiled blocks') and a profile without counts."""
    per_layer = load_calibration("h200")
    counted = {"llama/gqa": 16.0, "gpt2/mha": 12.25}
    per_kernel = priced_per_kernel(replace(per_layer, prefill_graph_host_s={"per_step": 47e-6, "per_layer": 21.4e-6}),
                                   counted, model("llama3_2_1b", 16))
    assert per_kernel.prefill_graph_host_s["per_kernel"] == pytest.approx(21.4e-6 / 16.0)
    plain = replace(per_kernel, prefill_kernels_per_layer={})

    def ttft(name: str, cal, *extra: str) -> float:
        cfg = compose(*H200, f"model={name}", *extra)
        return predict_inference(cfg, validate(cfg, None), cal).ttft_s

    assert ttft("gpt2_xl", plain) - ttft("gpt2_xl", per_kernel) == pytest.approx(48 * 21.4e-6 * (1 - 12.25 / 16.0))
    assert ttft("gpt2_xl", per_kernel, "workload.decode_mode=graph") == pytest.approx(ttft("gpt2_xl", plain, "workload.decode_mode=graph"))
    for same in ("llama3_2_1b", "llama2_7b"):
        assert ttft(same, per_kernel) == pytest.approx(ttft(same, plain)), same


def test_without_the_calibration_models_count_the_replay_stays_per_layer():
    """Counts without the calibration model's, or none, leave the replay per layer, and drop a per-kernel figure that an
    earlier fit left (the base profile's)."""
    cal = replace(load_calibration("h200"), prefill_graph_host_s={"per_step": 47e-6, "per_layer": 21.4e-6, "per_kernel": 1e-6})
    kept = priced_per_kernel(cal, {"gpt2/mha": 12.25}, model("llama3_2_1b", 16))
    assert kept.prefill_graph_host_s == {"per_step": 47e-6, "per_layer": 21.4e-6}
    assert kept.prefill_kernels_per_layer == {"gpt2/mha": 12.25}
    assert priced_per_kernel(cal, {}, None).prefill_graph_host_s == kept.prefill_graph_host_s


@pytest.mark.parametrize("counts, graph", [({"gpt2/mha": 0.0}, {"per_layer": 2e-5}),
                                           ({"gpt2/mha": 12.0}, {"per_step": 4e-5, "per_kernel": 1e-6}),
                                           ({"gpt2/mha": 12.0}, {"per_layer": 2e-5, "per_kernel": -1e-6})])
def test_a_profile_whose_kernel_counts_cannot_price_a_replay_is_refused(tmp_path, counts, graph):
    path = save_calibration(replace(load_calibration("h200"), prefill_kernels_per_layer=counts, prefill_graph_host_s=graph),
                            tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="prefill_kernels_per_layer"):
        load_calibration(str(path))
