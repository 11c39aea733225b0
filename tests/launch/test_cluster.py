"""The cluster path: Hydra's submitit launcher (the local executor stands in for SLURM)."""

from __future__ import annotations

import pytest


def test_submitit_local_launcher_runs_sweep(cli):
    # The launcher is under test, not the training: two steps each, unprofiled (its jobs run at once).
    cli.run("hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10", "parallel=dp,fsdp", "workload.steps=2",
            "workload.warmup_steps=1", "profile.enabled=false", multirun=True)
    children = cli.runs().dropna(subset=["tags.mlflow.parentRunId"])
    assert sorted(children["params.parallel.name"]) == ["dp", "fsdp"]
    assert (children.status == "FINISHED").all()
    assert (children["metrics.throughput_tokens_per_s"] > 0).all()


def test_slurm_launcher_config_composes():
    from conftest import REPO
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "parbench", "hydra/launcher=slurm", "hardware=h100_sxm",
                          "hardware.nodes=2", "hardware.gpus_per_node=8", "--cfg", "all", "--resolve"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    launcher = out[out.index("  launcher:"):out.index("  sweeper:")]
    assert "nodes: 2" in launcher and "gpus_per_node: 8" in launcher and "tasks_per_node: 1" in launcher
    assert "SlurmLauncher" in launcher


def test_two_node_static_rendezvous_on_localhost(tmp_path):
    """Two torchrun launches as node 0 and node 1 (one rank each) meet at node 0's address."""
    import threading

    from conftest import compose

    from parbench.config import resolve
    from parbench.launch.cluster import NodeInfo
    from parbench.launch.torchrun import run_torchrun, torchrun_command, worker_env

    cfg = compose("hardware=cpu", "hardware.nodes=2", "hardware.gpus_per_node=1", "launch.master_port=29731")
    resolve.save(cfg, tmp_path / resolve.RESOLVED_FILE)
    outcomes = {}

    def launch(rank: int) -> None:
        cmd = torchrun_command(cfg, NodeInfo(rank, 2, "127.0.0.1", cfg.launch.master_port), tmp_path, nproc_per_node=1)
        assert f"--node-rank={rank}" in cmd and "--master-addr=127.0.0.1" in cmd
        outcomes[rank] = run_torchrun(cmd, worker_env(cfg), tmp_path / f"node{rank}.log", 240, 40)

    threads = [threading.Thread(target=launch, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes[0].ok and outcomes[1].ok, (outcomes[0].log_tail, outcomes[1].log_tail)
    results = (tmp_path / "results.json").read_text()
    assert '"device_count": "2"' in results


def slurm_launcher(tmp_path, *overrides: str):
    """parbench's SLURM launcher as `python -m parbench -m hydra/launcher=slurm <overrides>` builds it."""
    from hydra import compose as hydra_compose, initialize_config_dir
    from omegaconf import OmegaConf

    from hydra_plugins.parbench_slurm.slurm_launcher import ParbenchSlurmLauncher
    from parbench.config.store import register_schema
    from parbench.launch.slurm import register_resolvers
    from parbench.paths import CONF_DIR

    register_schema()
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = hydra_compose("config", overrides=["hydra/launcher=slurm", f"hydra.sweep.dir={tmp_path}", *overrides],
                            return_hydra_config=True)
    params = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    params.pop("_target_")
    return ParbenchSlurmLauncher(**params)


def sbatch_script(tmp_path, *overrides: str) -> str:
    executor = slurm_launcher(tmp_path, *overrides).executor()
    return executor._executor._make_submission_file_text("python -u -m submitit.core._submit DIR", "uid")


@pytest.mark.slurm  # submitit's SLURM executor needs srun on PATH
def test_two_node_job_script_and_one_torchrun_per_node(tmp_path, monkeypatch):
    """hardware.nodes=2 x 8 GPUs: one sbatch job, one srun task per node; on each node (the SLURM_*
    variables of a 2-node allocation) torchrun meets node 0 at the same address and port, and only
    node 0 opens the MLflow run."""
    from conftest import compose

    from parbench.launch.cluster import current_node
    from parbench.launch.torchrun import torchrun_command

    script = sbatch_script(tmp_path, "hardware=h100_sxm", "hardware.nodes=2", "hardware.gpus_per_node=8",
                           "hydra.launcher.partition=gpu")
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=8",
                 "#SBATCH --cpus-per-task=32", "#SBATCH --partition=gpu", "#SBATCH --time=60", "#SBATCH --signal=USR2@0"):
        assert line in script.splitlines(), script
    assert "\nsrun --unbuffered --output" in script and "python -u -m submitit.core._submit DIR" in script

    cfg = compose("hardware=h100_sxm", "hardware.nodes=2", "hardware.gpus_per_node=8", "parallel=fsdp",
                  gpus=["NVIDIA H100 80GB HBM3"] * 8)
    allocation = {"SUBMITIT_EXECUTOR": "slurm", "SLURM_JOB_ID": "4242", "SLURM_ARRAY_JOB_ID": "4240",
                  "SLURM_ARRAY_TASK_ID": "2", "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2",
                  "SLURM_JOB_NODELIST": "gpu-[07-08]", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0"}
    commands, mains = [], []
    for node_id in (0, 1):
        for key, value in {**allocation, "SLURM_NODEID": str(node_id), "SLURM_PROCID": str(node_id)}.items():
            monkeypatch.setenv(key, value)
        node = current_node(cfg.hardware.nodes, cfg.launch.master_port)
        commands.append(" ".join(torchrun_command(cfg, node, tmp_path, nproc_per_node=8)))
        mains.append(node.is_main)
    for node_id, command in enumerate(commands):
        assert (f"--nproc-per-node=8 --max-restarts=0 --nnodes=2 --node-rank={node_id} --master-addr=gpu-07 "
                f"--master-port={29500 + 4242 % 1000}") in command, command
    assert mains == [True, False]


@pytest.mark.slurm  # submitit's SLURM executor needs srun on PATH
def test_cpu_profile_asks_slurm_for_cores_not_gpus(tmp_path):
    script = sbatch_script(tmp_path, "hardware=cpu", "hydra.launcher.partition=debug").splitlines()
    assert "#SBATCH --cpus-per-task=2" in script and not any("gpu" in line for line in script), script


def test_relative_sqlite_store_is_made_absolute_at_submission(tmp_path, monkeypatch):
    from parbench.launch.slurm import with_absolute_tracking

    monkeypatch.chdir(tmp_path)
    assert with_absolute_tracking(["parallel=dp"], "sqlite:///outputs/mlflow.db") == [
        "parallel=dp", f"tracking.uri=sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}"]
    assert with_absolute_tracking(["tracking.uri=sqlite:///a.db"], "sqlite:///outputs/mlflow.db") == [
        f"tracking.uri=sqlite:///{tmp_path / 'a.db'}"]
    assert with_absolute_tracking(["parallel=dp"], "http://127.0.0.1:5000") == ["parallel=dp"]


@pytest.mark.slurm  # submitit's SLURM executor needs srun on PATH
def test_auto_hardware_asks_slurm_for_what_this_host_resolves_to(tmp_path, monkeypatch):
    """hardware=auto (the default) is resolved on the submitting host, as the job resolves it on a node
    like it: no GPU there, the CPU profile's 2 ranks ask for 2 cores (two points never share them);
    4 H100s, 4 GPUs and 4 cores each."""
    import parbench.launch.slurm as slurm
    from parbench.config.hardware import GpuInfo

    monkeypatch.setattr(slurm, "_local_gpus", lambda: [])
    script = sbatch_script(tmp_path, "hydra.launcher.partition=debug").splitlines()
    assert "#SBATCH --cpus-per-task=2" in script and not any("gpu" in line for line in script), script
    monkeypatch.setattr(slurm, "_local_gpus", lambda: [GpuInfo("NVIDIA H100 80GB HBM3", 81559)] * 4)
    script = sbatch_script(tmp_path, "hydra.launcher.partition=gpu").splitlines()
    assert "#SBATCH --gpus-per-node=4" in script and "#SBATCH --cpus-per-task=16" in script, script
