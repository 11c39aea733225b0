"""Why does Mixtral's 2-row grouped GEMM (w1's shape) read a B made after the engine's build 15 % faster than a fresh
one (2026-11-29_mixtral31)? Hypothesis: the two experts a 2-row call reads lie exactly 112 MiB apart; in a fresh
process B's pages are physically contiguous, so the two experts' tiles fall on the same memory channels at the same
time; after a build that allocated and freed, B's pages are scattered. Each line: the CUTLASS kernel's median
(profiler, 30 calls) in one fresh process. Usage (one GPU): python placement.py"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "2026-11-29_mixtral31"))
from process_state import cutlass_us  # noqa: E402

E, K, N = 8, 4096, 14336
EXPERT = K * N  # elements between experts when packed: 112 MiB in bf16


def rows_on(first: int, second: int) -> torch.Tensor:
    """offs for one row on expert `first` and one on `second` (cumulative row ends)."""
    counts = [0] * E
    counts[first] += 1
    counts[second] += 1
    return torch.tensor([sum(counts[:i + 1]) for i in range(E)], device="cuda", dtype=torch.int32)


def strided_b(pad_elems: int) -> torch.Tensor:
    """B with `pad_elems` more elements between experts than packed."""
    stride = EXPERT + pad_elems
    flat = torch.randn(stride * E, dtype=torch.bfloat16, device="cuda")
    return flat.as_strided((E, K, N), (stride, N, 1))


def line(label: str, x: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> None:
    print(f"{label}: {cutlass_us(x, b, offs):.1f} µs  (B at {b.data_ptr():#x})", flush=True)


def main() -> None:
    torch.cuda.set_device(0)
    x = torch.randn(2, K, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(E, K, N, dtype=torch.bfloat16, device="cuda")
    one = torch.tensor([1] * E, device="cuda", dtype=torch.int32)
    line("fresh B, experts 0+1", x, b, rows_on(0, 1))
    line("fresh B, one row, expert 0", x[:1], b, one)
    for second in (2, 3, 4, 7):
        line(f"fresh B, experts 0+{second}", x, b, rows_on(0, second))
    line("fresh B, experts 0+0", x, b, rows_on(0, 0))
    for pad in (8 << 10, 1 << 20, 1 << 21):  # elements: 16 KiB, 2 MiB, 4 MiB
        line(f"experts {pad * 2 >> 10} KiB further apart, 0+1", x, strided_b(pad), rows_on(0, 1))
    # most of the free memory in 1 GiB pieces, written and kept: is a B made after written memory faster?
    free, _ = torch.cuda.mem_get_info()
    pieces = [torch.ones(1 << 30, dtype=torch.uint8, device="cuda") for _ in range(int(free * 0.6) >> 30)]
    line(f"B made after {len(pieces)} GiB written and kept, 0+1", x, torch.randn(E, K, N, dtype=torch.bfloat16, device="cuda"), rows_on(0, 1))
    # and every other piece freed back to the driver: a B made in the holes
    del pieces[::2]
    torch.cuda.empty_cache()
    line("B made after every other piece was freed, 0+1", x, torch.randn(E, K, N, dtype=torch.bfloat16, device="cuda"), rows_on(0, 1))
    del pieces
    # a build's pattern: made, copied, the first freed; B made in the cache's freed blocks
    built = [torch.randn(E, K, N, dtype=torch.bfloat16, device="cuda") for _ in range(4)]
    copies = [w.clone() for w in built]
    del built
    line("B made where four freed B-sized tensors were, 0+1", x, torch.randn(E, K, N, dtype=torch.bfloat16, device="cuda"), rows_on(0, 1))
    line("a copy made after the frees, 0+1", x, copies[0], rows_on(0, 1))
    line("the first B again, 0+1", x, b, rows_on(0, 1))


if __name__ == "__main__":
    main()
