"""`python -m parbench [overrides]`: the Hydra app; `-m` sweeps launch one torchrun per point.
`parbench report ...` is the report command (parbench.report.__main__)."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from parbench.config.store import register_schema
from parbench.launch.slurm import register_resolvers
from parbench.orchestrator import run_job
from parbench.paths import CONF_DIR

register_schema()
register_resolvers()  # conf/hydra/launcher/slurm.yaml's GPU/CPU requests


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def run(cfg: DictConfig) -> dict:
    return run_job(cfg)


def main() -> None:
    if sys.argv[1:2] == ["report"]:
        from parbench.report.__main__ import main as report  # matplotlib only for reports

        sys.exit(report(sys.argv[2:]))
    run()


if __name__ == "__main__":
    main()
