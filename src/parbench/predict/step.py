"""Step time of a training layout on one device's critical path:

    step = (matmul + memory-bound ops + optimizer) / (1 - pipeline bubble) + exposed communication
           + exposed host dispatch

matmul time from the model's FLOPs at the layout's GEMM size and the calibrated rate; memory-bound
ops (norms, RoPE, SwiGLU, residuals, the loss's softmax, AdamW) as bytes over the calibrated memory
bandwidth; communication per strategy (comm.py) minus what that strategy hides behind compute;
host dispatch per step and per layer and micro-batch, from the calibration (0 when not measured)."""

from __future__ import annotations

from dataclasses import dataclass, field

from parbench.config.schema import ModelConfig
from parbench.metrics.flops import recompute_factor, train_flops_per_token
from parbench.predict.calibration import Calibration
from parbench.predict.comm import exposed_seconds, step_comms
from parbench.predict.layout import Layout
from parbench.predict.memory import FP32, MemoryEstimate, estimate_memory, model_state_bytes, stage_params
from parbench.predict.params import param_counts

# Bytes each parameter's optimizer step reads and writes: AdamW reads p, g and both moments and
# writes p and the moments (28 B at fp32); SGD reads p and g and writes p (12 B).
OPTIMIZER_TRAFFIC = {"adamw": 28, "sgd": 12}


@dataclass(frozen=True)
class Prediction:
    step_time_s: float
    tokens_per_s: float
    matmul_s: float
    memory_bound_s: float
    bubble_s: float
    host_s: float  # host dispatch the step waits for (exposed)
    comm: dict[str, tuple[float, float]]  # strategy -> (seconds, exposed seconds)
    memory: MemoryEstimate
    calibration: str  # spec | measured ...
    host_bound: bool = False  # a GPU that waits for the host to dispatch its kernels
    notes: list[str] = field(default_factory=list)

    @property
    def exposed_comm_s(self) -> float:
        return sum(exposed for _, exposed in self.comm.values())

    @property
    def bottleneck(self) -> str:
        if self.host_bound:
            return "host dispatch"
        parts = {"matmul compute": self.matmul_s, "memory-bound ops": self.memory_bound_s,
                 "pipeline bubble": self.bubble_s, "host dispatch": self.host_s,
                 **{f"{name} communication": exposed for name, (_, exposed) in self.comm.items()}}
        return max(parts, key=parts.get)

    def as_dict(self) -> dict:
        return {"predicted_step_time_s": self.step_time_s, "predicted_tokens_per_s": self.tokens_per_s,
                "predicted_mem_peak_gb": self.memory.total_gb, "bottleneck": self.bottleneck,
                "matmul_s": self.matmul_s, "memory_bound_s": self.memory_bound_s, "bubble_s": self.bubble_s,
                "host_s": self.host_s,
                "comm_s": {k: v[0] for k, v in self.comm.items()},
                "exposed_comm_s": {k: v[1] for k, v in self.comm.items()},
                "memory_gb": self.memory.as_dict(), "calibration": self.calibration}


def typical_gemm_flops(m: ModelConfig, tokens: float, tp: int) -> float:
    """The GEMM whose size sets the matmul rate: `tokens` through the MLP's first matrix on one tp rank."""
    return 2 * tokens * m.hidden * m.ffn / tp


def matmul_seconds(layout: Layout, cal: Calibration) -> float:
    """The step's FLOPs (causal attention, recomputation included) shared evenly by the devices,
    at the rate of the layout's typical GEMM (a micro-batch through the MLP's first matrix)."""
    m = layout.cfg.model
    per_token = train_flops_per_token(m, param_counts(m), layout.seq_len, causal=True)
    flops = per_token * layout.tokens_per_step * recompute_factor(layout.activation_checkpointing)
    gemm = typical_gemm_flops(m, layout.microbatch_tokens, layout.dims.tp)
    return flops / layout.dims.world_size / cal.matmul_rate(gemm)


def memory_bound_seconds(layout: Layout, cal: Calibration) -> float:
    """Element-wise traffic: forward per layer and token reads and writes the norms (4h), residual
    adds (6h), RoPE on q and k and the SwiGLU product (3 ffn); backward twice that; selective and
    full checkpointing repeat the forward's element-wise ops (full also its matmuls, in
    matmul_seconds). Plus softmax/cross-entropy over fp32 logits and the
    optimizer step over the parameters this device updates."""
    m, d = layout.cfg.model, layout.dims
    hd = m.head_dim or m.hidden // m.heads
    h = m.hidden / (d.tp if layout.cfg.parallel.sp else 1)
    forward = 10 * h + 2 * (m.heads + m.kv_heads) * hd / d.tp + 3 * m.ffn * (m.top_k or 1) / d.tp
    passes = 3 + (1 if layout.activation_checkpointing != "none" else 0)
    tokens = layout.microbatch_tokens * layout.microbatches
    layers = forward * passes * tokens * layout.dtype_bytes * m.layers / d.pp
    loss = 6 * tokens * m.vocab / d.tp * FP32
    params, _, _ = model_state_bytes(layout, stage_params(layout))
    optimizer = OPTIMIZER_TRAFFIC.get(layout.cfg.workload.optimizer, 28) * params / FP32
    return (layers + loss + optimizer) / (cal.membw_gbps * 1e9)


def hidden_within(comm: dict[str, tuple[float, float]], compute_s: float) -> dict[str, tuple[float, float]]:
    """Overlap hides at most the compute there is to hide behind."""
    return {k: (t, max(exposed, t - compute_s)) for k, (t, exposed) in comm.items()}


def host_seconds(layout: Layout, cal: Calibration) -> float:
    """Dispatch time of one step on the host: per step, plus per layer of the stage and micro-batch."""
    return cal.host_s_per_step + cal.host_s_per_layer * layout.cfg.model.layers / layout.dims.pp * layout.microbatches


def exposed_host_seconds(device_s: float, host_s: float, on_cpu: bool) -> float:
    """What dispatch adds to the step: all of it on a CPU, which runs each op as the host dispatches
    it; on a GPU only what the device's work does not cover (the host queues kernels ahead)."""
    return host_s if on_cpu else max(0.0, host_s - device_s)


def predict_step(layout: Layout, cal: Calibration) -> Prediction:
    matmul, memory_bound = matmul_seconds(layout, cal), memory_bound_seconds(layout, cal)
    compute = matmul + memory_bound
    bubble = compute * layout.bubble / (1 - layout.bubble)
    comm = hidden_within(exposed_seconds(step_comms(layout), cal), compute)
    device = compute + bubble + sum(exposed for _, exposed in comm.values())
    on_cpu = layout.cfg.hardware.device_type == "cpu"
    host = exposed_host_seconds(device, host_seconds(layout, cal), on_cpu)
    step = device + host
    return Prediction(step, layout.tokens_per_step / step, matmul, memory_bound, bubble, host, comm,
                      estimate_memory(layout, cal.memory_overhead_gb), cal.label(layout.cfg.hardware.name),
                      host_bound=host > 0 and not on_cpu)
