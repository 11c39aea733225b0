"""`python -m parbench [overrides]`: the Hydra app; `-m` sweeps launch one torchrun per point.
`parbench <subcommand> ...` runs a subcommand of the table below instead."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from parbench.config.store import register_schema
from parbench.orchestrator import run_job
from parbench.paths import CONF_DIR
from parbench.registry import load_ref

# name -> "module:function" taking the remaining arguments and returning an exit code.
SUBCOMMANDS = {
    "plan": "parbench.planner:main",
    "calibrate": "parbench.calibrate:main",
}

register_schema()


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def hydra_app(cfg: DictConfig) -> dict:
    return run_job(cfg)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        sys.exit(load_ref(SUBCOMMANDS[sys.argv[1]])(sys.argv[2:]))
    hydra_app()


if __name__ == "__main__":
    main()
