"""Python's garbage collector under the loop's control, as torchtitan (gc_freq) and Megatron
(--manual-gc) run it: an automatic full collection stops the host for tens of milliseconds at
whatever step it falls on (a rank holds a few hundred thousand objects once torch is imported),
which a host-bound step (eager, checkpointed) shows as a slow, unsteady step; the loop collects
the young generations every `interval` steps instead."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Callable, Iterator


@contextmanager
def manual_gc(interval: int) -> Iterator[Callable[[int], None]]:
    """Automatic collection off inside (after one full collection of what building the job left);
    the yielded collect(step) runs a generation-1 collection every `interval` steps. interval 0:
    Python's automatic collection, and collect does nothing."""
    if interval <= 0:
        yield lambda step: None
        return
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()

    def collect(step: int) -> None:
        if step and step % interval == 0:
            gc.collect(1)

    try:
        yield collect
    finally:
        if was_enabled:
            gc.enable()
