"""Resume: a point whose resolved config already has a FINISHED run in the experiment is skipped.
One decision for every launcher path (local sweeps, SLURM jobs): `finished_run`, called by the job."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from parbench.config import resolve
from parbench.config.schema import Config

if TYPE_CHECKING:  # the store (and MLflow) load only where a store is opened
    from parbench.tracking.store import Store

HASH_TAG = "config_hash"
# Keys that say where results go or how the job is watched, not what is measured.
NOT_EXPERIMENT = ("tracking", "launch.timeout_s", "launch.stall_timeout_s", "launch.log_tail_lines",
                  "launch.master_port", "launch.check_fit", "launch.prestart", "dry_run", "resume",
                  "invalid_points", "compile_cache")


def config_hash(cfg: Config) -> str:
    """sha256 (16 hex digits) of the flattened resolved config without the NOT_EXPERIMENT keys."""
    flat = resolve.flatten(resolve.as_dict(cfg))
    kept = {k: v for k, v in flat.items() if not any(k == n or k.startswith(n + ".") for n in NOT_EXPERIMENT)}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]


def finished_run(store: Store, cfg: Config) -> str | None:
    """The id of a FINISHED run with this config's hash, when cfg.resume allows skipping; else None."""
    if not cfg.resume:
        return None
    found = store.search(f"tags.{HASH_TAG} = '{config_hash(cfg)}' and attributes.status = 'FINISHED'", 1)
    return found[0].info.run_id if found else None
