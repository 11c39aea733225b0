"""The training loop's garbage collection: automatic collection off inside the loop, a generation-1
collection every gc_interval steps, Python's own collection back afterwards."""

from __future__ import annotations

import gc

from parbench.workloads.manual_gc import manual_gc


def test_collections_run_every_interval_steps_and_automatic_collection_comes_back(monkeypatch):
    calls = []
    real_collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda generation=2: calls.append(generation) or real_collect(generation))
    assert gc.isenabled()
    with manual_gc(3) as collect:
        assert not gc.isenabled() and calls == [2]  # one full collection of what the build left
        for step in range(10):
            collect(step)
    assert calls == [2, 1, 1, 1] and gc.isenabled()  # steps 3, 6 and 9


def test_interval_zero_leaves_python_in_charge(monkeypatch):
    calls = []
    monkeypatch.setattr(gc, "collect", lambda generation=2: calls.append(generation))
    with manual_gc(0) as collect:
        assert gc.isenabled()
        for step in range(10):
            collect(step)
    assert calls == [] and gc.isenabled()


def test_automatic_collection_comes_back_after_a_failing_step():
    try:
        with manual_gc(5):
            raise RuntimeError("a rank's step failed")
    except RuntimeError:
        pass
    assert gc.isenabled()
