"""The training loop's host-device transfers that must not synchronise the stream."""

from __future__ import annotations

import time

import pytest
import torch

from parbench.workloads.host_transfer import HostCopy, to_device


def test_on_cpu_a_host_copy_reads_the_value_and_the_batch_stays_where_it_is():
    loss = torch.tensor(2.5)
    assert HostCopy(loss).read() == 2.5
    batch = torch.arange(6).reshape(2, 3)
    assert to_device(batch, torch.device("cpu")) is batch


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a queue of device work needs a GPU (run on the GPU machine)")
def test_reading_a_step_waits_for_that_step_not_for_the_work_queued_after_it():
    """The training loop reads step i after queueing step i+1: a loss read by Tensor.item() and a
    batch copied from pageable memory each wait for the whole stream (docs/results/2026-12-07_dispatch31.md)."""
    batch = torch.ones(2, 8, dtype=torch.long)
    to_device(batch, torch.device("cuda"))  # the pinned memory allocated before the clock starts
    torch.cuda.synchronize()
    copy = HostCopy(torch.full((), 3.0, device="cuda"))
    torch.cuda._sleep(2_000_000_000)  # about a second of device time, queued after the loss
    started = time.perf_counter()
    value = copy.read()
    batch = to_device(batch, torch.device("cuda"))
    waited = time.perf_counter() - started
    assert value == 3.0 and batch.is_cuda
    assert waited < 0.1, f"the read waited {waited:.3f} s: it synchronised the stream"
    torch.cuda.synchronize()
    assert batch.sum().item() == 16
