"""The cluster path: Hydra's submitit launcher (the local executor stands in for SLURM)."""

from __future__ import annotations


def test_submitit_local_launcher_runs_sweep(cli):
    cli.run("hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10", "parallel=dp,fsdp", multirun=True)
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
        cmd = torchrun_command(cfg, NodeInfo(rank, 2, "127.0.0.1"), tmp_path, nproc_per_node=1)
        assert f"--node-rank={rank}" in cmd and "--master-addr=127.0.0.1" in cmd
        outcomes[rank] = run_torchrun(cmd, worker_env(cfg, 1), tmp_path / f"node{rank}.log", 240, 40)

    threads = [threading.Thread(target=launch, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes[0].ok and outcomes[1].ok, (outcomes[0].log_tail, outcomes[1].log_tail)
    results = (tmp_path / "results.json").read_text()
    assert '"device_count": "2"' in results
