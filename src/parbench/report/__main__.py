"""`parbench report` / `python -m parbench.report`: a report (report.md, report.html, PNGs, CSVs)
from a sweep's runs, or from any runs an MLflow filter selects.

    parbench report                                    # the latest sweep in sqlite:///outputs/mlflow.db
    parbench report --sweep RUN_ID --baseline OTHER_SWEEP_ID
    parbench report --experiment parbench --filter "params.model.name = 'tiny'" --out outputs/report_tiny
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from parbench.report.build import build_report
from parbench.report.runs import ReportError, baseline_runs, select_runs

DEFAULT_URI = "sqlite:///outputs/mlflow.db"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="parbench report", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("--sweep", metavar="RUN_ID", help="the sweep's parent run (default: the latest sweep, "
                        "unless --filter is given)")
    parser.add_argument("--experiment", help="MLflow experiment (tracking.experiment; default: all)")
    parser.add_argument("--filter", dest="filter_string", metavar="QUERY",
                        help="MLflow search syntax, e.g. \"params.model.name = 'tiny'\"; without --sweep: every "
                             "matching run of the experiment")
    parser.add_argument("--uri", default=DEFAULT_URI, help=f"MLflow tracking URI (default {DEFAULT_URI})")
    parser.add_argument("--out", type=Path, help="output folder (default outputs/report/<sweep or filter>)")
    parser.add_argument("--baseline", metavar="SWEEP_OR_RUN", help="put every table beside this sweep's (or run's)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        runs = select_runs(args.uri, args.sweep, args.experiment, args.filter_string)
        baseline = baseline_runs(args.uri, args.baseline) if args.baseline else None
        print(f"parbench report: {len(runs.runs)} runs of {runs.title} ...", flush=True)
        out = args.out or Path("outputs/report") / (runs.parent_id or "filtered")
        built = build_report(runs, out, args.uri, baseline)
    except ReportError as error:
        print(f"parbench report: {error}", file=sys.stderr)
        return 2
    print(f"Report: {built.html}\n        {built.folder / 'report.md'} ({len(built.files)} files in {built.folder})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
