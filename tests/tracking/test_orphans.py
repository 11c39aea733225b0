"""reap_orphans: which RUNNING runs a later sweep marks FAILED."""

import socket
import subprocess
from types import SimpleNamespace

from parbench.paths import SWEEP_PENDING_FILE
from parbench.tracking.orphans import HOST_TAG, PID_TAG, reap_orphans


class FakeStore:
    """The three calls reap_orphans makes, over runs given as tag dicts."""

    def __init__(self, runs: dict[str, dict[str, str]]):
        self.runs, self.closed = runs, {}

    def search(self, _filter, _max):
        return [SimpleNamespace(info=SimpleNamespace(run_id=i), data=SimpleNamespace(tags=t)) for i, t in self.runs.items()]

    def set_tags(self, run_id, tags):
        self.runs[run_id].update(tags)

    def close(self, run_id, status):
        self.closed[run_id] = status


def test_a_killed_sweep_is_reaped_but_a_finished_one_waiting_for_sync_is_not(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = {HOST_TAG: socket.gethostname(), PID_TAG: str(gone.pid)}
    deferred = tmp_path / "deferred"
    deferred.mkdir()
    (deferred / SWEEP_PENDING_FILE).write_text("{}")
    store = FakeStore({"killed": {**dead, "sweep_dir": str(tmp_path / "killed")},
                       "deferred": {**dead, "sweep_dir": str(deferred)}})
    assert reap_orphans(store) == 1
    assert store.closed == {"killed": "FAILED"}
    assert store.runs["killed"]["failure_reason"].startswith("orphaned: the sweep was killed")
