"""Why the engine's decode runs Mixtral's 2-row grouped GEMMs faster (92 µs a call, call 2) than the matmul
microbenchmark times them (106-120 µs, calls 3 and 5): one F.grouped_mm of 2 rows over 8 of Mixtral's expert
matrices, timed by the profiler's kernel durations, with B as the microbenchmark makes it (torch.randn) and as the
model holds it (GroupedExperts, init_weights), with the rows in given experts, and after a Mixtral layer's norm.
Usage (GPU): python docs/results/2026-11-29_scale31/engine_vs_microbench.py"""

import statistics

import torch
import torch.nn.functional as F

from parbench.models.moe import GroupedExperts


def kernel_us(fn, calls: int = 30) -> dict[str, float]:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    times: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            times.setdefault(e.name[:60], []).append(e.device_time_total)
    return {name: statistics.median(t) for name, t in times.items()}


def event_us(fn, calls: int = 30) -> float:
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


def main() -> None:
    dev, bf16 = torch.device("cuda"), torch.bfloat16
    experts = GroupedExperts(8, 4096, 14336).to(dev)
    with torch.no_grad():
        for w in (experts.w1, experts.w2, experts.w3):
            w.normal_(0, 0.02)
    experts = experts.to(bf16)
    randn_b = torch.randn(8, 4096, 14336, dtype=bf16, device=dev)
    x = torch.randn(2, 4096, dtype=bf16, device=dev)
    for counts in ([1, 1, 0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0, 1, 0], [2, 0, 0, 0, 0, 0, 0, 0]):
        offs = torch.tensor(counts, device=dev).cumsum(0, dtype=torch.int32)
        for name, b in (("randn B", randn_b), ("model w1", experts.w1), ("model w3", experts.w3)):
            print(f"{counts} {name}: events {event_us(lambda: F.grouped_mm(x, b, offs=offs)):.1f} µs a call; kernels "
                  + ", ".join(f"{k} {v:.1f}" for k, v in kernel_us(lambda: F.grouped_mm(x, b, offs=offs)).items()), flush=True)
        h = torch.randn(2, 14336, dtype=bf16, device=dev)
        print(f"{counts} model w2: events {event_us(lambda: F.grouped_mm(h, experts.w2, offs=offs)):.1f} µs", flush=True)
        # three calls in a row as a layer runs them (w1, w3, then w2), the events over the three
        print(f"{counts} layer: {event_us(lambda: experts(x, torch.tensor(counts, device=dev))) / 3:.1f} µs a call", flush=True)


if __name__ == "__main__":
    main()
