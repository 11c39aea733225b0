"""Microbenchmarks (nccl-tests and roofline style), one module each; their configs and checks are in
parbench.workloads.specs.microbench."""
