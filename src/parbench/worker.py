"""Per-rank entry point that torchrun starts: `python -m parbench.worker <job dir>`.
Loads the resolved config (no Hydra), joins the mesh, runs the workload, rank 0 writes results."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from parbench.config.resolve import RESOLVED_FILE
from parbench.parallel.mesh import init_distributed, single_process_env
from parbench.workloads.registry import WORKLOADS, VerificationError, job_layout, load_config, run_workload
from parbench.workloads.reporting import StepReporter, device_tags, progress, write_results


@record  # torchrun then reports the first failing rank's exception as the root cause
def main(job_dir: Path) -> None:
    cfg = load_config(job_dir / RESOLVED_FILE)
    spec = WORKLOADS.get(cfg.workload.name)
    joins = spec.joins_process_group(cfg)
    if joins:
        progress(int(os.environ["RANK"]), f"joining the process group ({cfg.hardware.backend}) and building the mesh")
    env = (init_distributed(cfg, timeout_s=cfg.launch.timeout_s, parallel=job_layout(cfg)[0]) if joins
           else single_process_env(cfg))
    results = run_workload(spec, cfg, env, StepReporter(job_dir, env.is_main))
    failure = results.pop("failure", None)  # measured, then found wrong: record, then fail the run
    if env.is_main:
        results["tags"] = {**results.get("tags", {}), **device_tags(env.device, env.world_size)}
        write_results(job_dir, results)
    if joins:
        # Without this barrier gloo aborts about one run in 14 when a rank tears down early.
        dist.barrier()
        dist.destroy_process_group()
    if failure:
        raise VerificationError(failure)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
