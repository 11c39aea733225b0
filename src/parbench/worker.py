"""Per-rank entry point that torchrun starts: `python -m parbench.worker <job dir>`.
Loads the resolved config (no Hydra), joins the mesh, runs the workload, rank 0 writes results."""

from __future__ import annotations

import faulthandler
import os
import sys
from pathlib import Path

import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from parbench.config.resolve import RESOLVED_FILE
from parbench.launch.hang import STACK_FILE, STACK_SIGNAL
from parbench.parallel.mesh import init_distributed, single_process_env
from parbench.workloads.compile_cache import use_compile_cache
from parbench.workloads.registry import WORKLOADS, VerificationError, job_layout, load_config, run_workload
from parbench.workloads.reporting import StepReporter, device_tags, progress, write_results


@record  # torchrun then reports the first failing rank's exception as the root cause
def main(job_dir: Path) -> None:
    cfg = load_config(job_dir / RESOLVED_FILE)
    use_compile_cache(cfg)  # before anything compiles
    faulthandler.enable()  # a rank killed by a signal (SIGSEGV, SIGABRT) prints where it was
    dump_stack_on_signal(job_dir, int(os.environ["RANK"]))
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
    if joins:
        exit_now()


def dump_stack_on_signal(job_dir: Path, rank: int) -> None:
    """The orchestrator's hang watchdog asks every rank where it is (SIGUSR1): the stacks tell
    the rank outside a collective from those waiting in one."""
    path = job_dir / STACK_FILE.format(rank=rank)
    path.parent.mkdir(exist_ok=True)
    faulthandler.register(STACK_SIGNAL, file=path.open("w"), all_threads=True)  # the file stays open


def exit_now() -> None:
    """Leave a rank that ran collectives without the interpreter's finalisation: tensors that
    gloo's worker threads still reference would be freed there without the GIL, and the rank
    aborts ("terminate called without an active exception") after its results were written, about
    one run in ten under load. Engines with their own processes (vLLM) exit normally."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
