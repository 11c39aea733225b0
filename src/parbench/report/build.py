"""One report from a set of runs: the sections their workloads call for (never an empty one),
the failed runs listed, and the files written to one folder."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from parbench.report import document, fmt
from parbench.report.baseline import baseline_section
from parbench.report.document import Paragraph, Report, Section, Table
from parbench.report.inference import inference_runs, inference_section
from parbench.report.inference_verdict import log_scaling, scaling_table
from parbench.report.microbench import microbench_section
from parbench.report.runs import ReportError, RunSet, annotate
from parbench.report.training import training_section
from parbench.tracking.store import Store

FOLDER = "report"  # in the sweep dir, and the artifact folder on the parent run


@dataclass
class Built:
    folder: Path
    files: list[Path]
    metrics: dict[str, float] = field(default_factory=dict)  # for the sweep's parent run (alpha-beta fits)

    @property
    def html(self) -> Path:
        return self.folder / document.HTML


class ArtifactFetcher:
    """Downloads a run's artifact (e.g. profile/layers.csv) into a temporary folder, removed on
    exit; None when the run has no such artifact."""

    def __init__(self, uri: str):
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one bar per file otherwise
        self.client = MlflowClient(uri)
        self.folder = tempfile.TemporaryDirectory(prefix="parbench-report-")

    def __enter__(self) -> "ArtifactFetcher":
        return self

    def __exit__(self, *exc) -> None:
        self.folder.cleanup()

    def __call__(self, run_id: str, path: str) -> Path | None:
        target = Path(self.folder.name) / run_id
        target.mkdir(exist_ok=True)
        try:
            return Path(self.client.download_artifacts(run_id, path, str(target)))
        except (MlflowException, OSError):
            return None


def build_report(runs: RunSet, out: Path, uri: str, baseline: RunSet | None = None) -> Built:
    """Write report.md, report.html, PNGs and CSVs for these runs into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    metrics: dict[str, float] = {}
    with ArtifactFetcher(uri) as fetch:
        sections = [training_section(runs, out, fetch), inference_section(runs, out, fetch),
                    microbench_section(runs, out, metrics)]
    if baseline is not None:
        sections.append(baseline_section(runs, baseline))
    sections.append(failures_section(runs))
    report = Report(f"parbench report: {runs.title}", [Paragraph(overview(runs))], [s for s in sections if s])
    return Built(out, document.write(report, out), metrics)


def overview(runs: RunSet) -> str:
    done = runs.finished
    counts = ", ".join(f"{n} {w}" for w, n in done["workload"].value_counts().items())
    text = f"{fmt.count(len(runs.runs), 'run')}: {len(done)} finished ({counts or 'none'}), {len(runs.failed)} failed."
    devices = runs.runs.get("tags.device_name")
    if devices is not None and devices.notna().any():
        text += f" Devices: {', '.join(sorted(devices.dropna().unique()))}."
    return text + " Runs are labelled by the settings that differ between them."


def failures_section(runs: RunSet) -> Section:
    """The runs that did not finish, with their reason: the rest of the report leaves them out."""
    failed = runs.failed
    section = Section("Failed runs")
    if failed.empty:
        return section
    reasons = failed.get("tags.failure_reason", pd.Series("", index=failed.index)).fillna("(no reason logged)")
    shown = pd.DataFrame({"run": failed["label"], "status": failed["status"],
                          "reason": reasons.str.slice(0, 160)})
    data = pd.DataFrame({"run": failed["label"], "run_id": failed["run_id"], "status": failed["status"],
                         "reason": reasons})
    return section.add(Paragraph(f"{fmt.count(len(failed), 'run')} did not finish; every table above leaves them out. "
                                 "Each run's `log_tail` tag and `worker.log` artifact hold the details."),
                       Table(shown, data, "failed_runs.csv"))


def sweep_report(store: Store, parent_id: str, children: pd.DataFrame, sweep_dir: Path) -> list[Path]:
    """At a multirun's end (the sweep callback's `reports`): tp/pp overhead metrics on the inference
    runs, then the report in <sweep dir>/report, logged on the parent run under report/ together
    with the alpha-beta fits as metrics. A set the report refuses (mixed scaling) is said, not raised:
    the runs are already measured and logged."""
    runs = RunSet(annotate(children), f"sweep {sweep_dir.name} ({parent_id[:8]})", parent_id)
    if runs.runs.empty:
        return []
    inference = inference_runs(runs.finished)
    if not inference.empty:
        log_scaling(store, scaling_table(inference))
    try:
        built = build_report(runs, sweep_dir / FOLDER, store.uri)
    except ReportError as error:
        print(f"parbench report: {error}\n  (then: parbench report --sweep {parent_id} --uri {store.uri} --filter ...)")
        return []
    store.log_artifacts(parent_id, built.files, FOLDER)
    store.log_metrics(parent_id, built.metrics)
    return [built.html]
