"""A replayed prefill's cost per kernel: how many kernels a layer of each block structure runs, counted by the
calibration's engine runs (their `prefill_kernels`), and the replay's per-layer figure, fitted on the calibration
model, spread over that model's kernels. Between kernels a GPU idles about a microsecond, and a short element-wise
kernel takes two whatever its bytes: on an H200 at 1 x 512 the gaps were 0.89-0.97 µs a kernel in the Llama, Qwen3
and GPT-2 alike, and GPT-2's layer runs 12.25 kernels to the Llama's 16.0 (the calibration's count, 4 x 128), so a
figure per layer of the Llama put GPT-2's short prefills 10 % high (docs/results/2026-11-29_short_kernels31.md).
The counts are of compiled blocks, as the engine runs them by default on a GPU."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import replace

from parbench.config.schema import ModelConfig
from parbench.metrics.fits import fit_line
from parbench.models import block_structure
from parbench.predict.calibration import Calibration

Count = tuple[ModelConfig, float]  # a run's model and the kernels of its prefill


def kernels_per_layer(depths: list[Count], others: list[Count]) -> dict[str, float]:
    """Each structure's kernels a layer: the calibration model's from its depths (the line's slope; its intercept
    is what runs outside the layers: the embedding, the final norm, the head, the sampling), another structure's
    from a run, what it runs beyond that intercept over its layers (the mean of its runs). Empty without two depths."""
    line = fit_line([m.layers for m, _ in depths], [k for _, k in depths])
    if line is None or line.slope <= 0:
        return {}
    runs: dict[str, list[float]] = defaultdict(list)
    for m, k in others:
        runs[block_structure(m)].append((k - line.intercept) / m.layers)
    counted = {s: statistics.fmean(ks) for s, ks in runs.items()}
    return {**{s: k for s, k in counted.items() if k > 0}, block_structure(depths[0][0]): line.slope}


def priced_per_kernel(cal: Calibration, counted: dict[str, float], model: ModelConfig | None) -> Calibration:
    """The profile with the counts, and its replayed prefill's per-layer figure (fitted on `model`'s runs) also per
    kernel of `model`'s layer, where both are known."""
    kernels = counted.get(block_structure(model)) if model else None
    graph = {k: v for k, v in cal.prefill_graph_host_s.items() if k != "per_kernel"}  # none kept from another fit
    if kernels and "per_layer" in graph:
        graph["per_kernel"] = graph["per_layer"] / kernels
    return replace(cal, prefill_kernels_per_layer=counted, prefill_graph_host_s=graph)
