"""What in the engine's process makes the 2-row grouped GEMM of Mixtral's w1 shape run at 99 µs where a fresh process
runs it at 115 (calls 5 and 7, one host)? The CUTLASS kernel's median (profiler, eager, 30 calls, experts 0 and 1) in
one fresh process: first; after a one-rank NCCL process group; over a B allocated after 90 GB of other tensors; after
a torch.compile'd call; and over the first B again. Usage (one GPU): python process_state.py"""

import os
import socket
import statistics

import torch
import torch.distributed as dist
import torch.nn.functional as F


def cutlass_us(x, b, offs) -> float:
    run = lambda: [F.grouped_mm(x, b, offs=offs) for _ in range(30)]  # noqa: E731
    run()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    return statistics.median(e.device_time_total for e in prof.events()
                             if e.device_type == torch.autograd.DeviceType.CUDA and "cutlass" in e.name and "prepare" not in e.name)


def main() -> None:
    torch.cuda.set_device(0)
    x = torch.randn(2, 4096, dtype=torch.bfloat16, device="cuda")
    offs = torch.tensor([1, 2, 2, 2, 2, 2, 2, 2], device="cuda", dtype=torch.int32)
    b = torch.randn(8, 4096, 14336, dtype=torch.bfloat16, device="cuda")
    print(f"fresh process: {cutlass_us(x, b, offs):.1f} µs", flush=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))
    print(f"after a one-rank NCCL group: {cutlass_us(x, b, offs):.1f} µs", flush=True)
    filler = [torch.empty(10 << 30, dtype=torch.uint8, device="cuda") for _ in range(9)]
    late = torch.randn(8, 4096, 14336, dtype=torch.bfloat16, device="cuda")
    print(f"B allocated after 90 GB: {cutlass_us(x, late, offs):.1f} µs; the first B: {cutlass_us(x, b, offs):.1f} µs", flush=True)
    compiled = torch.compile(lambda t: (t * 2).sum())
    compiled(x)
    print(f"after a torch.compile'd call: {cutlass_us(x, b, offs):.1f} µs", flush=True)
    del filler
    torch.cuda.empty_cache()
    print(f"the 90 GB freed: {cutlass_us(x, b, offs):.1f} µs, the late B {cutlass_us(x, late, offs):.1f} µs", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
