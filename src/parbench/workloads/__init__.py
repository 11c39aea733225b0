"""Workloads: training (train.py), inference (inference/), microbenchmarks (microbench/) and the
FLOPs cross-check (flops_check.py). Their specs (config schema and checks, no torch) are in specs/,
registered in registry.WORKLOADS; importing this package registers every one."""

from parbench.workloads import specs  # noqa: F401
