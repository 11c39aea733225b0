"""Step time and memory of a training layout on one device's critical path, in one pass:

    layout (shapes, counts, stage)  ->  per-op compute (costs.py), host dispatch (host.py)  ->
    communication per strategy (comm.py)  ->  overlap  ->  step time, and memory (memory.py)

    step = compute / (1 - pipeline bubble) + exposed communication + device idle + exposed host dispatch

compute is the dense GEMMs, attention, element-wise work, the optimizer and the recomputed forward
(costs.py); communication per strategy minus what that strategy hides behind compute (never more
than the compute there is); a GPU's idle gaps between kernels, as calibrated; host dispatch (host.py: the
family's calls and ops at their calibrated costs) counts in full on a CPU, and on a GPU where it
outlasts the device's work as far ahead as the launch queue lets the host run (host.exposed_host_seconds)."""

from __future__ import annotations

from dataclasses import dataclass, field

from parbench.predict.calibration import Calibration
from parbench.predict.comm import exposed_seconds, step_comms
from parbench.predict.costs import Compute, step_compute
from parbench.predict.host import device_idle, exposed_host_seconds, host_seconds
from parbench.predict.layout import Layout
from parbench.predict.memory import MemoryEstimate, estimate_memory


@dataclass(frozen=True)
class Prediction:
    step_time_s: float
    tokens_per_s: float
    compute: Compute
    bubble_s: float
    host_s: float  # host dispatch the step waits for (exposed)
    comm: dict[str, tuple[float, float]]  # strategy -> (seconds, exposed seconds)
    memory: MemoryEstimate
    calibration: str  # spec | measured ...
    host_bound: bool = False  # a GPU that waits for the host to dispatch its kernels
    idle_s: float = 0.0  # a GPU's gaps between kernels (launches, the step's start)
    host_dispatch_s: float = 0.0  # the host's whole dispatch of the step, hidden or not
    notes: list[str] = field(default_factory=list)

    @property
    def matmul_s(self) -> float:
        return self.compute.matmul_s

    @property
    def memory_bound_s(self) -> float:
        return self.compute.memory_bound_s

    @property
    def exposed_comm_s(self) -> float:
        return sum(exposed for _, exposed in self.comm.values())

    @property
    def bottleneck(self) -> str:
        if self.host_bound:
            return "host dispatch"
        c = self.compute
        parts = {"matmul compute": c.matmul_s, "attention": c.attention_s, "memory-bound ops": c.memory_bound_s,
                 "recomputation": c.recompute_s,
                 "pipeline bubble": self.bubble_s, "host dispatch": self.host_s, "device idle": self.idle_s,
                 **{f"{name} communication": exposed for name, (_, exposed) in self.comm.items()}}
        return max(parts, key=parts.get)

    def as_dict(self) -> dict:
        return {"predicted_step_time_s": self.step_time_s, "predicted_tokens_per_s": self.tokens_per_s,
                "predicted_mem_peak_gb": self.memory.total_gb, "bottleneck": self.bottleneck,
                "matmul_s": self.matmul_s, "attention_s": self.compute.attention_s,
                "memory_bound_s": self.memory_bound_s, "recompute_s": self.compute.recompute_s,
                "bubble_s": self.bubble_s, "idle_s": self.idle_s,
                "host_s": self.host_s, "host_dispatch_s": self.host_dispatch_s,
                "comm_s": {k: v[0] for k, v in self.comm.items()},
                "exposed_comm_s": {k: v[1] for k, v in self.comm.items()},
                "memory_gb": self.memory.as_dict(), "calibration": self.calibration}


def hidden_within(comm: dict[str, tuple[float, float]], compute_s: float) -> dict[str, tuple[float, float]]:
    """Overlap hides at most the compute there is to hide behind."""
    return {k: (t, max(exposed, t - compute_s)) for k, (t, exposed) in comm.items()}


def predict_step(layout: Layout, cal: Calibration) -> Prediction:
    compute = step_compute(layout, cal)
    bubble = compute.total_s * layout.bubble / (1 - layout.bubble)
    comm = hidden_within(exposed_seconds(step_comms(layout), cal), compute.total_s)
    idle = device_idle(layout, cal)
    rest = bubble + sum(exposed for _, exposed in comm.values())
    on_cpu = layout.cfg.hardware.device_type == "cpu"
    dispatch = host_seconds(layout, cal)
    host = exposed_host_seconds(compute, rest, dispatch, on_cpu, idle)
    step = compute.total_s + idle.total_s + rest + host
    return Prediction(step, layout.tokens_per_step / step, compute, bubble, host, comm,
                      estimate_memory(layout, cal), cal.label(layout.cfg.hardware.name),
                      host_bound=host > 0 and not on_cpu, idle_s=idle.total_s, host_dispatch_s=dispatch.total_s)
