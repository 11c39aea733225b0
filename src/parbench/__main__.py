"""`python -m parbench [overrides]`: the Hydra app; `-m` sweeps launch one torchrun per point."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from parbench.config.store import register_schema
from parbench.launch.slurm import register_resolvers
from parbench.orchestrator import run_job
from parbench.paths import CONF_DIR

register_schema()
register_resolvers()  # conf/hydra/launcher/slurm.yaml's GPU/CPU requests


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def main(cfg: DictConfig) -> dict:
    return run_job(cfg)


if __name__ == "__main__":
    main()
