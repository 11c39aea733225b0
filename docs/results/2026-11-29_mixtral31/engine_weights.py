"""Mixtral's 2-row grouped GEMMs on the engine's own weights: the engine decode's CUTLASS grouped kernels by place in
a layer (w1, w3, w2), then the same F.grouped_mm on the engine's expert weights outside the engine: eager on one
layer's w1; in CUDA graphs of 32 calls over the 32 layers' w1 (as the engine goes layer by layer), over one layer's
w1 32 times, and over each layer's w1, w3 and w2 in turn; and eager on copies of one layer's w1, on randn, on randn scaled to the weights' spread, on the
weights scaled to randn's, and on the weights' values shuffled. Usage (one GPU, from benchmarks/):
python ../docs/results/2026-11-29_mixtral31/engine_weights.py"""

import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
from grouped_timeline import kernels  # noqa: E402
from grouped_timeline import engine_decoder  # noqa: E402


def cutlass_us(events: list) -> list[float]:
    return [e.time_range.end - e.time_range.start for e in events if "cutlass" in e.name and "prepare" not in e.name]


def graphed_median(calls: list) -> float:
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for call in calls:
            call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    graph.replay()
    torch.cuda.synchronize()
    return statistics.median(cutlass_us(kernels(lambda: [graph.replay() for _ in range(3)])))


def main() -> None:
    decoder, decode = engine_decoder()
    with torch.no_grad():
        times = cutlass_us(kernels(decode))
        for place, name in enumerate(("w1", "w3", "w2")):
            print(f"engine decode {name}: median {statistics.median(times[place::3]):.1f} µs "
                  f"({len(times[place::3])} calls)", flush=True)
        experts = [block.feed_forward.experts for block in decoder.model.layers.values()]
        x = torch.randn(2, 4096, dtype=torch.bfloat16, device="cuda")
        h = torch.randn(2, 14336, dtype=torch.bfloat16, device="cuda")
        offs = torch.tensor([1, 2, 2, 2, 2, 2, 2, 2], device="cuda", dtype=torch.int32)
        one = experts[0].w1
        randn = torch.randn_like(one)
        for label, b in (("layer 0's w1", one), ("a copy of layer 0's w1", one.clone()), ("randn B", randn),
                         ("randn B x 0.02", randn * 0.02), ("layer 0's w1 x 50", one * 50),
                         ("layer 0's w1's bits, shuffled", one.flatten()[torch.randperm(one.numel(), device="cuda")].view_as(one))):
            print(f"eager, {label}: {statistics.median(cutlass_us(kernels(lambda: [F.grouped_mm(x, b, offs=offs) for _ in range(30)]))):.1f} µs", flush=True)
        print(f"graphed, the 32 layers' w1: {graphed_median([lambda e=e: F.grouped_mm(x, e.w1, offs=offs) for e in experts]):.1f} µs", flush=True)
        print(f"graphed, layer 0's w1 32 times: {graphed_median([lambda: F.grouped_mm(x, one, offs=offs)] * 32):.1f} µs", flush=True)
        layerwise = [call for e in experts for call in (lambda e=e: F.grouped_mm(x, e.w1, offs=offs),
                                                        lambda e=e: F.grouped_mm(x, e.w3, offs=offs),
                                                        lambda e=e: F.grouped_mm(h, e.w2, offs=offs))]
        times = []
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            for call in layerwise:
                call()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for call in layerwise:
                call()
        graph.replay()
        torch.cuda.synchronize()
        times = cutlass_us(kernels(lambda: [graph.replay() for _ in range(3)]))
        for place, name in enumerate(("w1", "w3", "w2")):
            print(f"graphed, each layer's w1, w3, w2 in turn, {name}: median {statistics.median(times[place::3]):.1f} µs", flush=True)


if __name__ == "__main__":
    main()
