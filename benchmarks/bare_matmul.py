"""A bare torch.matmul, timed with CUDA events: the reference that parbench's matmul workload is
checked against (TFLOP/s within 3% at 8192^3 bf16). No parbench import.

    python benchmarks/bare_matmul.py --size 8192 --dtype bf16

Warm-up, then `iters` back-to-back a @ b between two events; TFLOP/s = 2 n^3 / mean time."""

from __future__ import annotations

import argparse

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--dtype", choices=DTYPES, default="bf16")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    n, dtype = args.size, DTYPES[args.dtype]
    a = torch.randn(n, n, dtype=dtype, device="cuda")
    b = torch.randn(n, n, dtype=dtype, device="cuda")
    for _ in range(args.warmup):
        c = torch.matmul(a, b)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(args.iters):
        c = torch.matmul(a, b)
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1e3 / args.iters
    print(f"bare torch.matmul {n}^3 {args.dtype} on {torch.cuda.get_device_name()}: {seconds * 1e6:.1f} us, "
          f"{2 * n**3 / seconds / 1e12:.1f} TFLOP/s ({c.shape})", flush=True)


if __name__ == "__main__":
    main()
