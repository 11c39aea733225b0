"""time_each: each call's own time, on CPU by the wall clock and on a GPU by events queued behind a
hold, which a slow host cannot outrun."""

from __future__ import annotations

import time

import pytest
import torch

from parbench.metrics.timing import time_each, time_graphed


def test_on_cpu_each_call_is_timed_by_the_wall_clock():
    calls = []
    times = time_each(lambda i: (calls.append(i), time.sleep(0.002)), 3, torch.device("cpu"), warmup=2)
    assert calls == [0, 1, 2, 3, 4] and len(times) == 3 and min(times) >= 0.002


@pytest.mark.skipif(not torch.cuda.is_available(), reason="events and the hold need a GPU (run on the GPU machine)")
def test_a_host_slower_than_the_hold_still_times_the_kernels_not_the_launches(capsys):
    """A call whose host side takes 1 ms and whose kernel takes microseconds: the first hold (about
    0.1 ms a call) runs out, a longer one is tried, and the times are the kernel's."""
    device = torch.device("cuda")
    x = torch.randn(256, 256, device=device)

    def slow_host(_: int) -> None:
        time.sleep(0.001)
        x.add_(1.0)

    times = time_each(slow_host, 20, device, warmup=2)
    assert max(times) < 0.5e-3, times
    assert "warning" not in capsys.readouterr().err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (run on the GPU machine)")
def test_a_graphed_call_is_timed_per_call_of_the_replayed_graph():
    """Each call a 64 MiB copy: per call the graph's mean is that copy's time (at most a few hundred µs on
    any data-centre GPU), and every index ran, once before the capture and once in it."""
    seen = []
    src, dst = torch.randn(16 * 2**20, device="cuda"), torch.empty(16 * 2**20, device="cuda")

    def copy(i: int) -> None:
        seen.append(i)
        dst.copy_(src)

    seconds = time_graphed(copy, 4, 5)
    assert seen == [0, 1, 2, 3] * 2
    assert 1e-6 < seconds < 1e-3
