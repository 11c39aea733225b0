"""The 2-row grouped GEMM of Mixtral's w1 shape (2 x 4096 x 14336 over 8 experts, rows in experts 0 and 1), its CUTLASS
kernel's median duration (profiler, 30 calls) eager and under torch.compile, with distinct rows and with the one
token's row twice (a batch-1 decode's top-2), B as randn and as a model parameter. Usage (one GPU): python compiled_call.py"""

import statistics

import torch
import torch.nn.functional as F


def kernel_us(fn, calls: int = 30) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return statistics.median(e.device_time_total for e in prof.events()
                             if e.device_type == torch.autograd.DeviceType.CUDA and "cutlass" in e.name and "prepare" not in e.name)


def main() -> None:
    dev, bf16 = torch.device("cuda"), torch.bfloat16
    b = torch.randn(8, 4096, 14336, dtype=bf16, device=dev)
    param = torch.nn.Parameter(b.clone(), requires_grad=False)
    offs = torch.tensor([1, 2, 2, 2, 2, 2, 2, 2], device=dev, dtype=torch.int32)
    distinct = torch.randn(2, 4096, dtype=bf16, device=dev)
    twice = distinct[:1].expand(2, -1).contiguous()
    compiled = torch.compile(lambda x, w: F.grouped_mm(x, w, offs=offs))
    with torch.no_grad():
        for rows_label, x in (("distinct rows", distinct), ("one row twice", twice)):
            for b_label, w in (("randn B", b), ("parameter B", param)):
                eager = kernel_us(lambda: F.grouped_mm(x, w, offs=offs))
                comp = kernel_us(lambda: compiled(x, w))
                print(f"{rows_label}, {b_label}: eager {eager:.1f} µs, compiled {comp:.1f} µs", flush=True)


if __name__ == "__main__":
    main()
