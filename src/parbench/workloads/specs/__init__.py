"""What the orchestrator knows of each workload without loading torch: its config schema, its own
checks and where its per-rank code lives. Importing this package registers every workload."""

from parbench.workloads.specs import elementwise, flops_check, inference, microbench, train  # noqa: F401
