"""Which node of a multi-node job this process is, and where the rendezvous lives (node 0)."""

from __future__ import annotations

from dataclasses import dataclass

from parbench.config import ConfigError


@dataclass(frozen=True)
class NodeInfo:
    rank: int
    count: int
    master_addr: str

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def current_node(nodes: int) -> NodeInfo:
    """Single node: this host. Several: the submitit/SLURM job environment (one task per node)."""
    if nodes == 1:
        return NodeInfo(0, 1, "127.0.0.1")
    try:
        import submitit

        job = submitit.JobEnvironment()
    except (ImportError, RuntimeError):
        raise ConfigError(f"hardware.nodes={nodes} needs one task per node from a cluster launcher: "
                          "add hydra/launcher=slurm (pip install -e '.[slurm]')") from None
    if job.num_nodes != nodes:
        raise ConfigError(f"hardware.nodes={nodes} but the SLURM job has {job.num_nodes} node(s): "
                          "set hydra.launcher.nodes to match")
    return NodeInfo(job.node, job.num_nodes, job.hostnames[0])
