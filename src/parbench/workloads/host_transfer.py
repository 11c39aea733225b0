"""A training step's tensors between host and device without synchronising the stream, so the host can
queue step i+1 while the device finishes step i (metrics/timing.py's StepClock reads each step a step late):
the batch goes up from pinned memory, the loss comes down into it."""

from __future__ import annotations

import torch


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on the device without synchronising: a copy from pageable memory waits for
    the whole stream, so the host could not queue a step while the device finishes the last."""
    if device.type != "cuda":
        return t
    return t.pin_memory().to(device, non_blocking=True)


class HostCopy:
    """A device scalar copied to the host as the stream reaches it: read() waits for that copy only.
    Tensor.item() synchronises the whole stream, so reading step i's loss after queueing step i+1
    would wait for step i+1 as well (its optimizer: 17 ms of a 1.7B model's host-bound step on an
    H100, docs/results/2026-12-07_dispatch31.md) and undo StepClock's lag."""

    def __init__(self, value: torch.Tensor):
        self._host = value.detach().to("cpu", non_blocking=True)  # from a GPU: into pinned memory
        self._copied = torch.cuda.Event() if value.is_cuda else None
        if self._copied is not None:
            self._copied.record()

    def read(self) -> float:
        if self._copied is not None:
            self._copied.synchronize()
        return self._host.item()
