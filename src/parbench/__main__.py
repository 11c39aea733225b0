"""`python -m parbench [overrides]`: the Hydra app; `-m` sweeps launch one torchrun per point.
`parbench <subcommand> ...` runs a subcommand of the table below instead (report, plan, calibrate, sync)."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from parbench.config.store import register_schema
from parbench.launch.interrupt import INTERRUPTS
from parbench.launch.slurm import register_resolvers
from parbench.orchestrator import run_job
from parbench.paths import CONF_DIR, unique_dir
from parbench.registry import load_ref

# name -> "module:function" taking the remaining arguments and returning an exit code.
SUBCOMMANDS = {
    "report": "parbench.report.__main__:main",
    "plan": "parbench.planner:main",
    "calibrate": "parbench.calibrate:main",
    "sync": "parbench.sync:main",
}

register_schema()
register_resolvers()  # conf/hydra/launcher/slurm.yaml's GPU/CPU requests
if not OmegaConf.has_resolver("parbench.unique_dir"):  # conf/config.yaml's run and sweep folders
    OmegaConf.register_new_resolver("parbench.unique_dir", unique_dir, use_cache=True)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def run(cfg: DictConfig) -> dict:
    return run_job(cfg)


def unknown_subcommand(word: str) -> str | None:
    """What to say of a first argument that is neither a subcommand, an option nor an override (Hydra
    would answer with a parse traceback)."""
    if word in SUBCOMMANDS or word.startswith(("-", "~")) or "=" in word:  # ~key: a deletion
        return None
    return (f"parbench: no subcommand {word!r}; the subcommands are {', '.join(SUBCOMMANDS)}, "
            "and a run takes Hydra overrides key=value (python -m parbench --help lists the config groups)")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:  # loaded only when asked for (report: matplotlib)
        sys.exit(load_ref(SUBCOMMANDS[sys.argv[1]])(sys.argv[2:]))
    if len(sys.argv) > 1 and (message := unknown_subcommand(sys.argv[1])):
        sys.exit(message)
    INTERRUPTS.install()  # before Hydra starts: a Ctrl-C during start-up stops the sweep cleanly too
    run()


if __name__ == "__main__":
    main()
