"""Does a 2-row grouped GEMM of Mixtral's shape run faster with other work between the calls, as in the engine's
decode, than back to back, as the calibration's graphs run it? The CUTLASS kernel's median duration (profiler) in CUDA
graphs of 40 calls: back to back; each call followed by a sleep kernel (torch.cuda._sleep) of about 5 and 50 µs; each
followed by a small element-wise kernel; with the SM clock and board power sampled by NVML during 50 replays of each.
Usage (one GPU): python spacing.py"""

import statistics
import threading
import time

import pynvml
import torch

from parbench.workloads.microbench.matmul import grouped_multiply, rotated_inputs, row_splits

SHAPE, CALLS = [2, 4096, 14336], 40


def sample_clocks(stop: threading.Event, out: list) -> None:
    handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    while not stop.is_set():
        out.append((pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                    pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3))
        time.sleep(0.005)


def graphed(call, calls: int) -> torch.cuda.CUDAGraph:
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for i in range(calls):
            call(i)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            call(i)
    graph.replay()
    torch.cuda.synchronize()
    return graph


def measure(label: str, between) -> None:
    inputs = rotated_inputs(SHAPE, torch.bfloat16, torch.device("cuda"), 512 << 20, False, CALLS, 8)
    multiply = grouped_multiply(row_splits(SHAPE[0], 8, True), False, torch.device("cuda"))

    def call(i: int) -> None:
        multiply(*inputs[i % len(inputs)])
        between()

    graph = graphed(call, CALLS)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
    cutlass = [e.device_time_total for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA and "cutlass" in e.name and "prepare" not in e.name]
    stop, samples = threading.Event(), []
    sampler = threading.Thread(target=sample_clocks, args=(stop, samples))
    sampler.start()
    start = time.perf_counter()
    for _ in range(50):
        graph.replay()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - start) / 50 / CALLS
    stop.set()
    sampler.join()
    clocks, power = zip(*samples) if samples else ((0,), (0,))
    print(f"{label}: cutlass kernel median {statistics.median(cutlass):.1f} µs ({len(cutlass)} calls), a call with what "
          f"follows it {wall * 1e6:.1f} µs; SM clock median {statistics.median(clocks):.0f} MHz, power median "
          f"{statistics.median(power):.0f} W", flush=True)


def main() -> None:
    pynvml.nvmlInit()
    small = torch.randn(4 << 20, device="cuda", dtype=torch.bfloat16)
    for label, between in (("back to back", lambda: None),
                           ("then sleep ~5 µs", lambda: torch.cuda._sleep(10_000)),
                           ("then sleep ~50 µs", lambda: torch.cuda._sleep(100_000)),
                           ("then an 8 MB element-wise kernel", lambda: small.mul_(1.0)),
                           ("back to back, again", lambda: None)):
        measure(label, between)


if __name__ == "__main__":
    main()
