"""Which node of a job this process is, and where the rendezvous lives (node 0 of the allocation)."""

from __future__ import annotations

from dataclasses import dataclass

from parbench.config import ConfigError

# In a SLURM job the rendezvous port is launch.master_port plus the job id modulo this, so two jobs
# that share node 0 (a sweep's points on one node, say) never ask for the same port.
PORT_SPREAD = 1000
# The run's tag with the job id squeue and scancel show (<array>_<task> for a sweep's jobs).
SLURM_JOB_TAG = "slurm_job"


@dataclass(frozen=True)
class NodeInfo:
    rank: int
    count: int
    master_addr: str
    master_port: int
    job_id: str | None = None  # the cluster's id of this job (submitit's form: <array>_<task> in arrays)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def standalone(self) -> bool:
        """Alone on this host, outside a cluster allocation: torchrun picks a free local port."""
        return self.job_id is None and self.count == 1

    def tags(self) -> dict[str, str]:
        """What the MLflow run records about where it ran."""
        if self.job_id is None:
            return {}
        return {SLURM_JOB_TAG: self.job_id, "rendezvous": f"{self.master_addr}:{self.master_port}"}


def current_node(nodes: int, master_port: int) -> NodeInfo:
    """A SLURM job: the allocation (SLURM_* variables, one task per node). Outside one: this host
    for one node; several nodes need a cluster launcher."""
    job = _job_environment()
    if job is None or (nodes == 1 and job.name() != "slurm"):
        if nodes == 1:
            return NodeInfo(0, 1, "127.0.0.1", master_port)
        raise ConfigError(f"hardware.nodes={nodes} needs one task per node from a cluster launcher: "
                          "add hydra/launcher=slurm (pip install -e '.[slurm]')")
    if job.num_nodes != nodes:
        raise ConfigError(f"hardware.nodes={nodes} but the SLURM job has {job.num_nodes} node(s): "
                          "set hydra.launcher.nodes to match")
    if job.name() != "slurm":  # submitit's local executor: every "node" is this host
        return NodeInfo(job.node, job.num_nodes, job.hostnames[0], master_port)
    port = master_port + int(job.raw_job_id) % PORT_SPREAD
    return NodeInfo(job.node, job.num_nodes, job.hostnames[0], port, job.job_id)


def is_main_node() -> bool:
    """False only on the other nodes of a multi-node job (they must not record anything)."""
    job = _job_environment()
    return job is None or job.node == 0


def _job_environment():
    """submitit's view of the job this process runs in, or None outside a submitit job."""
    try:
        import submitit

        return submitit.JobEnvironment()
    except (ImportError, RuntimeError):
        return None
