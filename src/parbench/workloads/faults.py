"""Faults a training run injects on purpose (debug.*), to exercise the orchestrator's failure
handling: a crash, a hang, an allocation that runs out of memory (docs/reliability.md)."""

from __future__ import annotations

import time
from typing import Callable

import torch

from parbench.config.schema import Config
from parbench.distenv import DistEnv


def inject_fault(cfg: Config, env: DistEnv, step: int, flush: Callable[[], None]) -> None:
    """debug.crash_at_step / hang_at_step / alloc_at_step: exercise the orchestrator's failure handling;
    flush() first records the steps still unread, as a real fault would find them recorded."""
    d = cfg.debug
    if env.rank != d.fault_rank or step not in (d.crash_at_step, d.hang_at_step, d.alloc_at_step):
        return
    flush()
    if step == d.crash_at_step:
        raise RuntimeError(f"injected crash at step {step} (debug.crash_at_step)")
    if step == d.hang_at_step:
        print(f"[parbench] rank {env.rank} hangs at step {step} (debug.hang_at_step)", flush=True)
        time.sleep(10**7)
    if step == d.alloc_at_step:
        print(f"[parbench] rank {env.rank} allocates {d.alloc_gb:,.1f} GB at step {step} (debug.alloc_at_step)",
              flush=True)
        torch.ones(int(d.alloc_gb * 2**30) // 4, device=env.device)  # filled: every page is touched
