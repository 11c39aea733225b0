"""One line on the host a device call ran on: its CPU, and how fast it dispatches small torch ops (µs, median of 5).

Host-bound steps (eager, checkpointed) move by up to 1.8x between H100 hosts while the GPU-bound ones do not
(docs/results/2026-12-07_hosts31.md); this line, in every call's gpu.txt, is to tell whether the CPU says why.
"""
import platform
import statistics
import time

import torch


def cpu_model() -> str:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def us_per_op(x: torch.Tensor, n: int = 5000) -> float:
    """Median over 5 rounds of the time to issue n small adds, per add (a GPU tensor's adds are launch-bound)."""
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            x.add_(1)
        if x.is_cuda:
            torch.cuda.synchronize()
        rounds.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(rounds)


gpu = torch.zeros(16, device="cuda")
us_per_op(gpu, 500)  # warm-up: context and kernel load
print(f"host: {cpu_model()}, {torch.get_num_threads()} threads; "
      f"cpu add {us_per_op(torch.zeros(16)):.2f} us, cuda launch {us_per_op(gpu):.2f} us")
