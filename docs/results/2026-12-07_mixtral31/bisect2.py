"""Is the faster read of Mixtral's 2-row grouped GEMM a property of the tensor or of the process? In ONE process
(2026-11-29_mixtral31 compared a post-build B in one process with a pre-build B in another): a B made first; Bs carved
out of larger blocks (the caching allocator's split of a freed block twice B's size, views at offsets 0, 512 B and
1 MiB into a buffer); then Mixtral's engine built as a run builds it (build_shard: every weight allocated empty, then
filled layer by layer from float32 pieces that are freed); then a B made after the build, the engine's w1 of layer
0, a copy of the first B, and the first B again. Each: the CUTLASS kernel's median (profiler, 30 eager calls, experts 0 and 1) and CUDA
events over the same 30 calls. Usage (one H200, from benchmarks/): python ../docs/results/2026-12-07_mixtral31/bisect2.py"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parents[1] / "2026-11-29_mixtral31"))
from decode_mbu import single_device_env  # noqa: E402
from parbench.planner import compose_config  # noqa: E402
from parbench.workloads.inference.model_parallel import build_shard  # noqa: E402
from process_state import cutlass_us  # noqa: E402

E, K, N = 8, 4096, 14336


def events_us(x: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> float:
    """Mean of 30 back-to-back calls by CUDA events (prepare kernel included)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(30):
        F.grouped_mm(x, b, offs=offs)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / 30


def timed(x: torch.Tensor, offs: torch.Tensor):
    """A printer of one B's times over rows x split by offs."""
    def line(label: str, b: torch.Tensor) -> None:
        where = f"ptr {b.data_ptr():#x}, 2 MiB offset {b.data_ptr() % (2 << 20)}, strides {b.stride()}"
        print(f"{label}: kernel {cutlass_us(x, b, offs):.1f} µs, events {events_us(x, b, offs):.1f} µs ({where})", flush=True)
    return line


def randn_b() -> torch.Tensor:
    return torch.randn(E, K, N, dtype=torch.bfloat16, device="cuda")


def main() -> None:
    torch.cuda.set_device(0)
    line = timed(torch.randn(2, K, dtype=torch.bfloat16, device="cuda"),
                 torch.tensor([1, 2, 2, 2, 2, 2, 2, 2], device="cuda", dtype=torch.int32))
    first = randn_b()
    line("B made first", first)
    block = torch.empty(2 * E * K * N, dtype=torch.bfloat16, device="cuda")
    del block
    line("B split from a freed block twice its size", randn_b())
    buf = torch.empty(2 * E * K * N, dtype=torch.bfloat16, device="cuda")
    for offset in (0, 256, 1 << 19):  # elements: 0, 512 B, 1 MiB
        view = buf[offset:offset + E * K * N].view(E, K, N)
        view.normal_()
        line(f"B a view {offset * 2} B into a buffer", view)
    del buf, view
    env = single_device_env("cuda")
    model = build_shard(compose_config(["model=mixtral_8x7b"]).model, 0, env, torch.bfloat16)
    print(f"engine built: {torch.cuda.memory_allocated() / 2**30:.1f} GiB allocated, "
          f"{torch.cuda.memory_reserved() / 2**30:.1f} GiB reserved", flush=True)
    late = randn_b()
    line("B made after the build", late)
    w1 = next(iter(model.layers.values())).feed_forward.experts.w1.detach()
    line("the engine's layer-0 w1", w1)
    line("a copy of the first B, made after the build", first.clone())
    line("B made first, again", first)
    line("B made after the build, again", late)


if __name__ == "__main__":
    main()
