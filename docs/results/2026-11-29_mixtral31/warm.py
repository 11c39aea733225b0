"""Does the 2-row grouped GEMM of Mixtral's w1 shape run faster once the GPU has worked a while, or under no_grad?
The CUTLASS kernel's median (profiler, eager, 30 calls, experts 0 and 1) in a fresh process: first; under no_grad;
after 5 s and after 20 more seconds of the same calls back to back; after 10 s of 1 GiB copies. Usage: python warm.py"""

import statistics
import time

import torch
import torch.nn.functional as F


def cutlass_us(run) -> float:
    run()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    return statistics.median(e.device_time_total for e in prof.events()
                             if e.device_type == torch.autograd.DeviceType.CUDA and "cutlass" in e.name and "prepare" not in e.name)


def busy(seconds: float, work) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        work()
        torch.cuda.synchronize()


def main() -> None:
    x = torch.randn(2, 4096, dtype=torch.bfloat16, device="cuda")
    offs = torch.tensor([1, 2, 2, 2, 2, 2, 2, 2], device="cuda", dtype=torch.int32)
    b = torch.randn(8, 4096, 14336, dtype=torch.bfloat16, device="cuda")
    calls = lambda: [F.grouped_mm(x, b, offs=offs) for _ in range(30)]  # noqa: E731
    print(f"first: {cutlass_us(calls):.1f} µs", flush=True)
    with torch.no_grad():
        print(f"under no_grad: {cutlass_us(calls):.1f} µs", flush=True)
    busy(5, calls)
    print(f"after 5 s of these calls: {cutlass_us(calls):.1f} µs", flush=True)
    busy(20, calls)
    print(f"after 25 s of these calls: {cutlass_us(calls):.1f} µs", flush=True)
    src, dst = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"), torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    busy(10, lambda: dst.copy_(src))
    print(f"after 10 s of 1 GiB copies: {cutlass_us(calls):.1f} µs", flush=True)


if __name__ == "__main__":
    main()
