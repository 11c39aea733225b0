"""A bare torch.distributed all_reduce: the reference that parbench's collectives workload is
checked against (busbw within 5% at 1 GiB). No parbench import. On GPUs over NCCL, timed with CUDA
events; without GPUs over gloo, timed with the wall clock (use a smaller size there):

    torchrun --standalone --nproc-per-node=2 benchmarks/bare_allreduce.py --size-mib 1024
    torchrun --standalone --nproc-per-node=2 benchmarks/bare_allreduce.py --size-mib 64   # CPU, gloo

Scheme (nccl-tests'): warm-up, barrier, `iters` back-to-back in-place all_reduces, time per op
averaged over ranks; busbw = bytes / time x 2(n-1)/n."""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist


def timed_all_reduces(buf: torch.Tensor, iters: int) -> float:
    """Seconds per all_reduce of `iters` back-to-back ones: CUDA events on a GPU, else the wall clock."""
    if buf.is_cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            dist.all_reduce(buf)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3 / iters
    begin = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    return (time.perf_counter() - begin) / iters


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    n = dist.get_world_size()
    nbytes = args.size_mib * 2**20
    buf = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    for _ in range(args.warmup):
        dist.all_reduce(buf)
    dist.barrier()
    if buf.is_cuda:
        torch.cuda.synchronize()
    seconds = torch.tensor([timed_all_reduces(buf, args.iters)], dtype=torch.float64, device=device)
    dist.all_reduce(seconds)
    seconds = seconds.item() / n
    algbw = nbytes / seconds / 1e9
    if dist.get_rank() == 0:
        print(f"bare all_reduce {args.size_mib} MiB fp32, {n} ranks ({dist.get_backend()}): time {seconds * 1e6:.1f} us, "
              f"algbw {algbw:.1f} GB/s, busbw {algbw * 2 * (n - 1) / n:.1f} GB/s", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
