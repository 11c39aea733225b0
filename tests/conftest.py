"""Shared helpers: run the real CLI (Hydra -> torchrun -> workers) against a temp MLflow store."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[1]
# The user's own calibration profiles (parbench calibrate) never reach the tests' predictions.
os.environ["PARBENCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="parbench-test-cache-")


class Cli:
    """`python -m parbench ...` in a temp dir, with its own SQLite MLflow store."""

    def __init__(self, root: Path):
        self.root = root
        self.uri = f"sqlite:///{root / 'mlflow.db'}"

    def command(self, *overrides: str, multirun: bool = False) -> list[str]:
        where = (f"hydra.sweep.dir={self.root / 'sweep'}" if multirun else f"hydra.run.dir={self.root / 'run'}")
        return [sys.executable, "-m", "parbench", *(["-m"] if multirun else []), "hardware=cpu",
                f"tracking.uri={self.uri}", where, *overrides]

    def env(self) -> dict[str, str]:
        return {**os.environ, "CUDA_VISIBLE_DEVICES": ""}

    def run(self, *overrides: str, multirun: bool = False, timeout: float = 600,
            check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(self.command(*overrides, multirun=multirun), cwd=self.root, env=self.env(),
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"parbench failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        return proc

    def start(self, *overrides: str, multirun: bool = False) -> subprocess.Popen:
        """The CLI in the background (to signal it); its output goes to <root>/cli.out and cli.err."""
        return subprocess.Popen(self.command(*overrides, multirun=multirun), cwd=self.root, env=self.env(),
                                stdout=(self.root / "cli.out").open("w"), stderr=(self.root / "cli.err").open("w"))

    def job_dir(self, num: int | None = None) -> Path:
        return self.root / "run" if num is None else self.root / "sweep" / str(num)

    def steps(self, num: int | None = None) -> list[dict]:
        lines = (self.job_dir(num) / "steps.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def losses(self, num: int | None = None) -> list[float]:
        return [row["loss"] for row in self.steps(num)]

    def trained_losses(self, num: int | None = None) -> list[float]:
        """The warm-up and measured steps' losses: a profiled run's profiler window (extra steps after
        them) left out, so that it compares with an unprofiled reference step for step."""
        return [row["loss"] for row in self.steps(num) if row["phase"] != "profile"]

    def results(self, num: int | None = None) -> dict:
        return json.loads((self.job_dir(num) / "results.json").read_text())

    def runs(self):
        import mlflow

        mlflow.set_tracking_uri(self.uri)
        return mlflow.search_runs(search_all_experiments=True, order_by=["start_time ASC"])


# Tiny Hugging Face config.json files, one per family model=hf builds (tests/models/hf_tiny/<family>).
HF_TINY = REPO / "tests" / "models" / "hf_tiny"
HF_FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "gpt2")
# Training that shows a wrong gradient within a step or two (lr 0.02), without the profile window,
# whose extra steps let MoE routing drift; the single-process reference of tests/parallel.
TRAIN_STEPS = ("workload.lr=0.02", "workload.warmup_steps=1", "workload.steps=3", "workload.batch_size=4")
TRAIN = (*TRAIN_STEPS, "profile.enabled=false")
# The dense model tests/parallel's fast layouts train: the tiny preset with Qwen3-style q/k norms,
# whose weight gradients tp and sp must reduce (a missing reduction moves the loss by 1e-4..1e-3).
DENSE = ("model.qk_norm=true",)
# The shared 2-rank sweeps below: profiled (their collectives are measured) over TRAIN's steps.
PROFILED_TRAIN = (*TRAIN_STEPS, "profile.enabled=true", "profile.active_steps=2", "profile.plots=false")
DP_FSDP = ("parallel=dp,fsdp", *PROFILED_TRAIN)
# Fully checkpointed: the recomputed forward's collectives are counted too (tests/predict).
TP_SP_CP_RUN = (*PROFILED_TRAIN, *DENSE, "workload.activation_checkpointing=full")
TP_SP_CP = ("parallel=tp,sp,cp", *TP_SP_CP_RUN)

# Attention figures per head width, as a GPU profile holds them (tests of their fit and use).
ATTENTION_WIDTHS = {"64": {"attention_tflops": 400, "attention_extra_positions": 700, "attention_call_s": 40e-6,
                           "attention_forward_tflops": 600, "attention_forward_extra_positions": 300,
                           "attention_forward_call_s": 10e-6},
                    "128": {"attention_tflops": 550, "attention_extra_positions": 900, "attention_call_s": 50e-6,
                            "attention_forward_tflops": 700, "attention_forward_extra_positions": 500,
                            "attention_forward_call_s": 15e-6}}


def hf_model(family: str) -> tuple[str, ...]:
    """The overrides that build tests/models/hf_tiny/<family>/config.json, training on 64 tokens as
    the tiny presets do (not up to its max_position_embeddings)."""
    return "model=hf", f"model.path={HF_TINY / family}", "model.default_seq_len=64"


def one_process_losses(root: Path, *overrides: str) -> list[float]:
    """Per-step losses of the one-process run (DDP of one rank) the layouts must reproduce."""
    root.mkdir(exist_ok=True)
    cli = Cli(root)
    cli.run("hardware.gpus_per_node=1", "parallel=dp", *overrides)
    return cli.losses()


def single_process_losses(root: Path, *overrides: str) -> list[float]:
    """one_process_losses of TRAIN with these overrides."""
    return one_process_losses(root, *TRAIN, *overrides)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_gloo_rank(rank: int, fn, world: int, port: int) -> None:
    """One spawned rank: join a gloo group, run fn(rank, world), tear down, and leave as parbench's
    workers do (without the interpreter's finalisation, where gloo aborts now and then)."""
    import torch.distributed as dist

    from parbench.worker import exit_now

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        fn(rank, world)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    exit_now()


def spawn_gloo_ranks(fn, world: int = 2) -> None:
    """fn(rank, world) on `world` gloo ranks; any rank's failure fails the caller."""
    import torch.multiprocessing as mp

    # spawn, not fork: forking a process whose torch already runs OpenMP threads can deadlock.
    mp.start_processes(run_gloo_rank, args=(fn, world, free_port()), nprocs=world, start_method="spawn")


@pytest.fixture(autouse=True)
def vllm_must_be_installed(request) -> None:
    """A `vllm`-marked test FAILS (never skips) where vLLM cannot run, with the install or fix line."""
    if request.node.get_closest_marker("vllm") is None:
        return
    from parbench.workloads.specs.vllm_engine import vllm_environment_problem

    problem = vllm_environment_problem()
    if problem:
        pytest.fail(problem, pytrace=False)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


# A torchrun launch costs ~10 s on 2 cores, most of it start-up. Tests that check different things of
# the same run share it through these session fixtures instead of each launching its own.

@pytest.fixture(scope="session")
def reference_losses(tmp_path_factory) -> Callable[..., list[float]]:
    """one_process_losses(*overrides), run once a session per set of overrides."""
    cache: dict[tuple[str, ...], list[float]] = {}

    def losses(*overrides: str) -> list[float]:
        if overrides not in cache:
            cache[overrides] = one_process_losses(tmp_path_factory.mktemp("reference"), *overrides)
        return cache[overrides]

    return losses


def shared_sweep(tmp_path_factory, name: str, *overrides: str) -> Cli:
    cli = Cli(tmp_path_factory.mktemp(name))
    cli.run(*overrides, multirun=True)
    return cli


@pytest.fixture(scope="session")
def dp_fsdp_sweep(tmp_path_factory) -> Cli:
    """DP_FSDP's sweep (job 0 dp, job 1 fsdp): the orchestrator's sweep, the predicted bytes and
    memory (tests/predict) and ZeRO's AdamW reference (tests/parallel/test_zero.py)."""
    return shared_sweep(tmp_path_factory, "dp_fsdp", *DP_FSDP)


@pytest.fixture(scope="session")
def tp_sp_cp_sweep(tmp_path_factory) -> Cli:
    """TP_SP_CP's sweep (jobs 0 tp, 1 sp, 2 cp): their losses against one process (tests/parallel)
    and tp's and sp's collectives against the prediction (tests/predict)."""
    return shared_sweep(tmp_path_factory, "tp_sp_cp", *TP_SP_CP)


def family_decode_overrides(family: str) -> tuple[str, ...]:
    """The native engine on a tiny family on 1 rank, tp=2 and pp=2, each checking its KV-cache decode
    against recomputing the sequence (workload.verify); profiled, as inference is by default."""
    return ("workload=inference", *hf_model(family), "parallel=dp,tp,pp", "workload.verify=true",
            "workload.warmup=0", "workload.repeats=1", "workload.input_len=20", "workload.output_len=8")


@pytest.fixture(scope="session")
def family_decodes(tmp_path_factory) -> Callable[[str], Cli]:
    """family_decode_overrides(family)'s sweep, run once a session per family: the family's decode
    (tests/models/test_hf_families.py) and qwen2's tp=2 communication shares (tests/workloads)."""
    cache: dict[str, Cli] = {}

    def sweep(family: str) -> Cli:
        if family not in cache:
            cache[family] = shared_sweep(tmp_path_factory, f"decode_{family}", *family_decode_overrides(family))
        return cache[family]

    return sweep


def compose(*overrides: str, gpus=()):
    """The typed, resolved Config that `python -m parbench <overrides>` would run, for unit tests."""
    from hydra import compose as hydra_compose, initialize_config_dir

    from parbench.config import resolve
    from parbench.workloads.registry import typed_config
    from parbench.config.store import register_schema
    from parbench.paths import CONF_DIR

    register_schema()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        node = hydra_compose("config", overrides=list(overrides))
    return resolve.resolve(typed_config(node), list(gpus))


@pytest.fixture
def model_config():
    """Load a conf/model/<name>.yaml into a typed ModelConfig."""
    from omegaconf import OmegaConf

    from parbench.config.schema import ModelConfig
    from parbench.paths import CONF_DIR

    def load(name: str) -> ModelConfig:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(ModelConfig),
                                                   OmegaConf.load(CONF_DIR / "model" / f"{name}.yaml")))

    return load
