"""Communication of one training step per device, strategy by strategy: which collectives, how many
calls, how many bytes each (nccl-tests' size: all_gather's output, reduce_scatter's input, the
buffer of all_reduce, all_to_all's send buffer, a send's message), over which group and link.
Times follow the latency-bandwidth fit: t = calls x latency + bytes x bus factor / busbw."""

from __future__ import annotations

import math
from dataclasses import dataclass

from parbench.config.schema import head_width
from parbench.predict.calibration import Calibration, LinkFit
from parbench.predict.layout import Layout
from parbench.models.shapes import FP32, size

DDP_BUCKET_BYTES = 25 * 2**20  # DDP's bucket_cap_mb default: the gradient buckets it all-reduces
BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
              "broadcast": lambda n: 1.0, "send_recv": lambda n: 1.0}


@dataclass(frozen=True)
class Comm:
    strategy: str  # whose overlap fraction applies
    op: str
    bytes: float  # per call
    calls: int
    group: int  # ranks in the group
    inter_node: bool

    def seconds(self, cal: Calibration) -> float:
        if self.group <= 1 or not self.calls:
            return 0.0
        link: LinkFit = cal.inter_node if self.inter_node else cal.intra_node
        return self.calls * (link.latency_s + self.bytes * BUS_FACTOR[self.op](self.group) / (link.busbw_gbps * 1e9))


def data_parallel_comms(layout: Layout) -> list[Comm]:
    """Gradient averaging: DDP all-reduces fp32 gradients in 25 MiB buckets over dp x cp; FSDP2
    all-gathers each block's parameters in the compute dtype (again in backward when it reshards
    after forward) and reduce-scatters fp32 gradients over fsdp x cp, plus HSDP's all-reduce over dp;
    ZeRO reduce-scatters gradients and all-gathers the updated parameters over dp (stage 3 per block)."""
    d, named = layout.dims, layout.stage
    grads = FP32 * size(named)
    if "dp" in layout.enabled:  # and DDP broadcasts the module's buffers from rank 0 every forward
        buckets, group, across = math.ceil(grads / DDP_BUCKET_BYTES), d.dp * d.cp, layout.crosses_nodes("dp", "cp")
        buffers = FP32 * layout.shapes.buffers
        forwards = layout.microbatches * layout.stages_per_rank
        return [Comm("dp", "all_reduce", grads / buckets, buckets, group, across),
                *([Comm("dp", "broadcast", buffers, forwards, group, across)] if buffers else [])]
    if "fsdp" in layout.enabled:
        return _fsdp_comms(layout, size(named))
    if "zero" in layout.enabled:
        z, params = layout.cfg.parallel.zero, size(named) * layout.dtype_bytes
        across = layout.crosses_nodes("dp")
        gather_calls = 2 * (layout.cfg.model.layers // d.pp) if z.stage == 3 else 1
        return [Comm("zero", "reduce_scatter" if z.stage >= 1 else "all_reduce", grads, 1, d.dp, across),
                Comm("zero", "all_gather", params / gather_calls, gather_calls, d.dp, across)]
    return []


def _fsdp_comms(layout: Layout, elements: int) -> list[Comm]:
    """Forward gathers every block and the root (embeddings, norm, head); backward gathers again
    what was resharded: the root and every block but the last, which FSDP2 keeps (parallel/fsdp.py)."""
    d, dtype = layout.dims, layout.dtype_bytes
    shard_group, across = d.fsdp * d.cp, layout.crosses_nodes("fsdp", "cp")
    blocks = layout.cfg.model.layers // d.pp
    block = layout.block_on_rank
    root = elements - blocks * block
    comms = [Comm("fsdp", "all_gather", elements * dtype / (blocks + 1), blocks + 1, shard_group, across),
             Comm("fsdp", "reduce_scatter", elements * FP32 / (blocks + 1), blocks + 1, shard_group, across)]
    if layout.cfg.parallel.fsdp_reshard_after_forward:
        regathered = (blocks - 1) * block + root
        comms.append(Comm("fsdp", "all_gather", regathered * dtype / blocks, blocks, shard_group, across))
    if d.dp > 1:  # HSDP: the shards' gradients averaged over the replicas
        comms.append(Comm("fsdp", "all_reduce", elements * FP32 / shard_group, 1, d.dp, layout.crosses_nodes("dp")))
    return comms


def activation_bytes_per_layer(layout: Layout) -> float:
    """One micro-batch's hidden states through one layer, on one cp rank."""
    return layout.microbatch_tokens * layout.cfg.model.hidden * layout.dtype_bytes


def tp_comms(layout: Layout) -> list[Comm]:
    """Tensor parallel as torch's parallel styles run it, per micro-batch: each row-parallel GEMM
    all-reduces its output forward and each column-parallel one its input's gradient backward (q, k, v
    and the MLP's up projections one by one); the vocab-parallel embedding all-reduces its output, the
    head its input's gradient, and loss_parallel three per-token fp32 figures (max, sum, target). With sp
    each block all-gathers its attention and MLP input and reduce-scatters their outputs, mirrored
    backward (the embedding and head likewise, learned positions gathered backward), and at the optimizer
    step the norms' weight (and bias) gradients are all-reduced. Full checkpointing recomputes a block's
    forward up to its last GEMM (whose output backward does not need): one all-reduce more, or two
    all-gathers and a reduce-scatter. Per-head q/k norms (Qwen3) all-reduce their weight gradients. A
    pipeline stage counts its own; the last (head and loss) sets the pace."""
    d, m, sp = layout.dims, layout.cfg.model, layout.cfg.parallel.sp
    act, layers, mbs = activation_bytes_per_layer(layout), m.layers // d.pp, layout.microbatches
    names = [name for name, _ in layout.shapes.block]
    moe = any(".experts." in name for name in names)  # the experts stay replicated over tp
    colwise = 3 + (0 if moe else 1 + ("feed_forward.w3.weight" in names))
    full = layout.activation_checkpointing == "full"
    embedding = 1 if d.pp == 1 else 0
    norm = sum(name.startswith("attention_norm.") for name in names)  # a norm's parameters
    small = [("all_reduce", layout.microbatch_tokens * FP32, 3 * mbs),
             ("all_reduce", m.hidden * FP32, (2 * layers + 1) * norm if sp else 0),
             ("all_reduce", head_width(m) * FP32,
              layers * sum(name.startswith(("attention.q_norm.", "attention.k_norm.")) for name in names))]
    if sp:
        positions = m.hidden * layout.seq_len * layout.dtype_bytes  # one sequence's learned positions
        small.append(("all_gather", positions, mbs * embedding if layout.family.learned_positions else 0))
        gathers = (4 + 2 * full) * layers * mbs + (embedding + 1) * mbs
        big = [("all_gather", act, gathers), ("reduce_scatter", act, (4 + full) * layers * mbs + (embedding + 1) * mbs)]
    else:
        big = [("all_reduce", act, ((1 if moe else 2) + full + colwise) * layers * mbs + (embedding + 1) * mbs)]
    return [Comm("tp", op, nbytes, calls, d.tp, layout.crosses_nodes("tp")) for op, nbytes, calls in big + small if calls]


def model_parallel_comms(layout: Layout) -> list[Comm]:
    """tp: tp_comms; pp: each micro-batch's activations sent forward and their gradients back at every
    stage boundary; cp (all-gather form): per layer K and V gathered forward, their gradients
    reduce-scattered backward; ep: per MoE layer two all-to-alls forward (dispatch, combine) and two
    backward."""
    d, m = layout.dims, layout.cfg.model
    act, layers, mbs = activation_bytes_per_layer(layout), m.layers // d.pp, layout.microbatches
    comms = tp_comms(layout) if d.tp > 1 else []
    if d.pp > 1:
        sends = 2 * mbs * layout.stages_per_rank
        comms.append(Comm("pp", "send_recv", act, sends, 2, layout.crosses_nodes("pp")))
    if d.cp > 1:
        hd = head_width(m)
        kv = 2 * layout.microbatch_tokens * d.cp * m.kv_heads / d.tp * hd * layout.dtype_bytes
        comms += [Comm("cp", op, kv, layers * mbs, d.cp, layout.crosses_nodes("cp"))
                  for op in ("all_gather", "reduce_scatter")]
    if "ep" in layout.enabled and d.ep > 1:
        comms.append(Comm("ep", "all_to_all", act * m.top_k, 4 * layers * mbs, d.ep, layout.crosses_nodes("fsdp")))
    return comms


def step_comms(layout: Layout) -> list[Comm]:
    return data_parallel_comms(layout) + model_parallel_comms(layout)


def exposed_seconds(comms: list[Comm], cal: Calibration) -> dict[str, tuple[float, float]]:
    """Per strategy: (communication seconds, seconds not hidden behind compute)."""
    out: dict[str, tuple[float, float]] = {}
    for c in comms:
        t = c.seconds(cal)
        total, exposed = out.get(c.strategy, (0.0, 0.0))
        out[c.strategy] = (total + t, exposed + t * (1 - cal.overlap.get(c.strategy, 0.0)))
    return out
