"""`python -m parbench [overrides]`: the Hydra app; `-m` sweeps launch one torchrun per point.
`parbench sync [DIR ...]` uploads results that did not reach the tracking store."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from parbench.config.store import register_schema
from parbench.launch.interrupt import INTERRUPTS
from parbench.orchestrator import run_job
from parbench.paths import CONF_DIR

register_schema()


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def main(cfg: DictConfig) -> dict:
    return run_job(cfg)


def cli() -> None:
    if sys.argv[1:2] == ["sync"]:
        from parbench.sync import main as sync_main

        sync_main(sys.argv[2:])
    else:
        INTERRUPTS.install()  # before Hydra starts: a Ctrl-C during start-up stops the sweep cleanly too
        main()


if __name__ == "__main__":
    cli()
