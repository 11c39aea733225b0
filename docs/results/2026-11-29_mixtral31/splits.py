"""The 2-row grouped GEMM of Mixtral's w1 shape over randn B, its CUTLASS kernel's median duration (profiler, eager,
30 calls) for each of the microbenchmark's 8 router-like splits and for experts 0 and 1; then the microbenchmark's
graph (40 calls cycling the 8 splits) by kernel. Usage (one GPU): python splits.py"""

import statistics

import torch
import torch.nn.functional as F

from parbench.workloads.microbench.matmul import grouped_multiply, row_splits


def cutlass_us(run) -> float:
    run()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    return statistics.median(e.device_time_total for e in prof.events()
                             if e.device_type == torch.autograd.DeviceType.CUDA and "cutlass" in e.name and "prepare" not in e.name)


def main() -> None:
    x = torch.randn(2, 4096, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8, 4096, 14336, dtype=torch.bfloat16, device="cuda")
    splits = [torch.tensor([1, 1, 0, 0, 0, 0, 0, 0]), *row_splits(2, 8, True)]
    for counts in splits:
        offs = counts.cumsum(0).to(device="cuda", dtype=torch.int32)
        print(f"split {counts.tolist()}: {cutlass_us(lambda: [F.grouped_mm(x, b, offs=offs) for _ in range(30)]):.1f} µs", flush=True)
    multiply = grouped_multiply(row_splits(2, 8, True), False, torch.device("cuda"))
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(40):
            multiply(x, b)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(40):
            multiply(x, b)
    print(f"graph of 40, the 8 splits in turn: {cutlass_us(lambda: [graph.replay() for _ in range(3)]):.1f} µs", flush=True)


if __name__ == "__main__":
    main()
