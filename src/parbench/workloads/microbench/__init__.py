"""Microbenchmarks: what the hardware can do before any model runs (matmul, collectives, p2p,
membw, tp_linear, topology). Each module registers one workload; they ignore model and parallel."""

# Importing the modules registers them.
from parbench.workloads.microbench import collectives, matmul, membw, p2p, topology, tp_linear  # noqa: F401
