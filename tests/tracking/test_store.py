"""Several jobs writing one SQLite MLflow store at once must neither fail nor lose data."""

from __future__ import annotations

import multiprocessing as mp

from parbench.config.resolve import flatten
from parbench.tracking.store import Store

WRITERS, RUNS_EACH, METRICS_EACH = 3, 2, 20


def write_runs(uri: str, writer: int) -> None:
    store = Store(uri, "concurrency")
    for r in range(RUNS_EACH):
        run_id = store.create_run(f"w{writer}-r{r}", {"writer": str(writer)})
        store.log_params(run_id, {f"p{i}": str(i) for i in range(120)})  # more than one batch
        store.log_step_rows(run_id, [{"step": s, "loss": float(s)} for s in range(METRICS_EACH)])
        store.log_metrics(run_id, {"throughput_tokens_per_s": 1000.0 + writer})
        store.finish(run_id, ok=True)


def test_concurrent_writers_on_one_sqlite_store(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=write_runs, args=(uri, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    store = Store(uri, "concurrency")
    runs = store.client.search_runs([store.experiment_id], max_results=100)
    assert len(runs) == WRITERS * RUNS_EACH
    for run in runs:
        assert run.info.status == "FINISHED" and len(run.data.params) == 120
        assert len(store.client.get_metric_history(run.info.run_id, "steps/loss")) == METRICS_EACH


def test_flatten_nested_config():
    assert flatten({"model": {"hidden": 64, "name": "tiny"}, "seed": 0, "launch": {"env": {}}}) == {
        "model.hidden": "64", "model.name": "tiny", "seed": "0", "launch.env": "{}"}
