"""Reading one rank's Kineto trace (torch.profiler's Chrome-trace JSON): its complete events, and
what each one is.

What counts as what:
  GPU trace (it has `kernel` events): communication = NCCL kernels (`ncclDevKernel_*`,
    `ncclKernel_*`); memcpy = `gpu_memcpy` and `gpu_memset`; compute = every other kernel.
  CPU trace (gloo): communication = `gloo:<collective>` ranges, which gloo's worker threads
    record while a collective runs (gloo runs FSDP's reduce_scatter as an all_reduce, and the
    trace says so); compute = operator calls (`aten::*`, `fsdp::*`, ...) on the other threads,
    except collective calls (`c10d::*`, which only enqueue) and waits (blocked, not computing).
The analysis of those events is parbench.metrics.trace.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import orjson

from parbench.metrics import intervals as iv

LAYER_RANGE_PREFIX = "parbench.layer:"  # record_function ranges the profiler puts around model layers
BACKWARD_PREFIX = "autograd::engine::evaluate_function:"
OPTIMIZER_PREFIX = "Optimizer."  # torch.optim records Optimizer.step#AdamW.step, Optimizer.zero_grad#...
PHASES = ("forward", "backward", "optimizer")
NO_LAYER = "-"

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv", "broadcast")
# nccl-tests bus bandwidth factors for n ranks (algbw x factor = busbw).
BUSBW_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}
# Element sizes by the dtype spellings traces use: c10 names on NCCL kernels (BFloat16),
# C++ names in gloo's recorded input types (c10::BFloat16, float, long int).
DTYPE_BYTES = {"float": 4, "float32": 4, "bfloat16": 2, "half": 2, "float16": 2, "double": 8, "float64": 8,
               "long int": 8, "long": 8, "int64": 8, "int": 4, "int32": 4, "short int": 2, "short": 2,
               "int16": 2, "bool": 1, "unsigned char": 1, "byte": 1, "uint8": 1, "signed char": 1,
               "char": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
COMM_CALL_PREFIXES = ("c10d::", "_c10d_functional::", "c10d_functional::", "record_param_comms", "nccl:")
COLLECTIVE_CALL_PREFIXES = ("c10d::", "_c10d_functional::", "c10d_functional::")
NON_OPERATOR_PREFIXES = ("autograd::", "profiler::")
# Events on the device timeline. Kineto also mirrors record_function ranges there
# (gpu_user_annotation), shifted to when the GPU ran them: ranges are read from the host only,
# device events are placed in a step by the host range that launched them.
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")


@dataclass(eq=False, slots=True)  # identity hash: events key per-event tables; slots: 100k events build fast
class Event:
    name: str
    cat: str
    start: float  # microseconds, as in the trace
    end: float
    thread: tuple  # (pid, tid)
    args: dict

    @property
    def dur(self) -> float:
        return self.end - self.start

    @property
    def on_host(self) -> bool:
        return self.cat not in DEVICE_CATS


def load_trace(path: Path | str) -> dict:
    """A Kineto trace as written by torch.profiler (plain or gzipped JSON); orjson parses a GPU
    step's 100k events in about half the time json takes, and this parse is most of what the
    default profile window costs."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        return orjson.loads(f.read())


def complete_events(trace: dict) -> list[Event]:
    return [Event(e["name"], e.get("cat", ""), float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)),
                  (e.get("pid"), e.get("tid")), e.get("args", {}))
            for e in trace.get("traceEvents", []) if e.get("ph") == "X" and "ts" in e]


def collective_type(raw: str) -> str:
    """all_reduce, all_gather, ... from a kernel name, a gloo range or a c10d collective name."""
    s = re.sub("[^a-z]", "", raw.lower())
    for prefix in ("nccldevkernel", "ncclkernel", "nccl", "gloo"):
        s = s.removeprefix(prefix)
    for key, name in (("allreduce", "all_reduce"), ("allgather", "all_gather"),
                      ("reducescatter", "reduce_scatter"), ("alltoall", "all_to_all"),
                      ("sendrecv", "send_recv"), ("send", "send_recv"), ("recv", "send_recv"),
                      ("broadcast", "broadcast")):
        if s.startswith(key):
            return name
    return "other"


def comm_kind(e: Event) -> str:
    """The collective a communication event ran: NCCL kernels carry the c10d name as an argument."""
    return collective_type(str(e.args.get("Collective name") or e.name))


def is_gpu_trace(events: list[Event]) -> bool:
    return any(e.cat == "kernel" for e in events)


def is_comm(e: Event, gpu: bool) -> bool:
    if gpu:
        return e.cat == "kernel" and e.name.lower().startswith("nccl")
    return e.name.startswith("gloo:")


def is_comm_call(e: Event) -> bool:
    """CPU-side collective calls and waits: neither compute nor the communication itself."""
    return e.name.startswith(COMM_CALL_PREFIXES) or "wait" in e.name.lower()


def is_cpu_compute(e: Event) -> bool:
    """An operator call (aten::mm, fsdp::chunk_cat, ...) that is not a collective call or wait.
    Autograd nodes and Python-level ranges are left out: they wrap operators, and also the time
    their thread blocks on a collective (FSDP's post-backward waits for its reduce-scatter)."""
    return (e.cat == "cpu_op" and "::" in e.name and not e.name.startswith(NON_OPERATOR_PREFIXES)
            and not is_comm_call(e))


def group_size_from_trace(trace: dict) -> int | None:
    """The process-group size when every multi-rank group of the trace has the same one."""
    sizes = {g.get("pg_size") for g in trace.get("distributedInfo", {}).get("pg_config", [])}
    sizes = {s for s in sizes if isinstance(s, int) and s > 1}
    return sizes.pop() if len(sizes) == 1 else None


def itemsize(dtype: Any) -> int | None:
    return DTYPE_BYTES.get(str(dtype).lower().removeprefix("c10::")) if dtype is not None else None


@dataclass(frozen=True)
class Collective:
    kind: str
    interval: iv.Interval
    nbytes: float | None  # nccl-tests "size": total bytes (all_gather: output, reduce_scatter: input)
    ranks: int | None


def describe_collective(e: Event, gpu: bool, default_ranks: int | None) -> Collective:
    """Type, size and group size of a communication event, from what the trace records."""
    if gpu:
        kind = comm_kind(e)
        ranks = e.args.get("Group size") or default_ranks
        size = itemsize(e.args.get("dtype"))
        n_in, n_out = e.args.get("In msg nelems"), e.args.get("Out msg nelems")
        nbytes = max(n_in or 0, n_out or 0) * size if size and (n_in or n_out) else None
        return Collective(kind, (e.start, e.end), nbytes, ranks)
    kind = comm_kind(e)
    dims, types = e.args.get("Input Dims"), e.args.get("Input type")
    nbytes = None
    if dims and types and itemsize(types[0]):
        elements = 1
        for d in dims[0]:
            elements *= d
        # gloo records the local input: an all_gather moves ranks x that.
        scale = default_ranks if kind == "all_gather" else 1
        nbytes = elements * itemsize(types[0]) * scale if scale else None
    return Collective(kind, (e.start, e.end), nbytes, default_ranks)
