"""Runs left RUNNING by a sweep that was SIGKILLed: each run records its orchestrator's pid, start
time and host; a later sweep on that host marks those whose process is gone as FAILED."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from parbench.launch.processes import is_alive, start_ticks
from parbench.paths import SWEEP_PENDING_FILE

if TYPE_CHECKING:  # the store (and MLflow) load only where a store is opened
    from parbench.tracking.store import Store

PID_TAG, STARTED_TAG, HOST_TAG = "orchestrator_pid", "orchestrator_started", "orchestrator_host"


def process_tags() -> dict[str, str]:
    """Tags that name this orchestrator process for good (pid, its start time, the host)."""
    return {PID_TAG: str(os.getpid()), STARTED_TAG: start_ticks(os.getpid()) or "",
            HOST_TAG: socket.gethostname()}


def close_deferred(tags: dict[str, str]) -> bool:
    """Whether this is a finished sweep's parent whose close was left to `parbench sync`."""
    return "sweep_dir" in tags and (Path(tags["sweep_dir"]) / SWEEP_PENDING_FILE).exists()


def reap_orphans(store: Store) -> int:
    """Mark FAILED the RUNNING runs of this experiment whose orchestrator on this host is gone;
    runs of other hosts are left alone (their process cannot be seen from here), and so are the
    parents of finished sweeps that wait for `parbench sync`."""
    host, reaped = socket.gethostname(), 0
    for run in store.search("attributes.status = 'RUNNING'", 1000):
        tags = run.data.tags
        if tags.get(HOST_TAG) != host or not tags.get(PID_TAG, "").isdigit():
            continue
        if is_alive(int(tags[PID_TAG]), tags.get(STARTED_TAG) or None) or close_deferred(tags):
            continue
        store.set_tags(run.info.run_id, {"status": "FAILED", "failure_reason":
                                         f"orphaned: the sweep was killed (orchestrator pid {tags[PID_TAG]} "
                                         f"on {host} is gone)"})
        store.close(run.info.run_id, "FAILED")
        reaped += 1
    if reaped:
        print(f"[parbench] marked {reaped} orphaned run(s) FAILED: their sweep was killed", flush=True)
    return reaped
