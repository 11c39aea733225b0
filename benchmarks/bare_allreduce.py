"""A bare torch.distributed all_reduce, timed with CUDA events: the reference that parbench's
collectives workload is checked against (busbw within 5% at 1 GiB). No parbench import.

    torchrun --standalone --nproc-per-node=2 benchmarks/bare_allreduce.py --size-mib 1024

Scheme (nccl-tests'): warm-up, barrier, `iters` back-to-back in-place all_reduces between two
events, time per op averaged over ranks; busbw = bytes / time x 2(n-1)/n."""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    n = dist.get_world_size()
    nbytes = args.size_mib * 2**20
    buf = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    for _ in range(args.warmup):
        dist.all_reduce(buf)
    dist.barrier()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(args.iters):
        dist.all_reduce(buf)
    end.record()
    torch.cuda.synchronize()
    seconds = torch.tensor([start.elapsed_time(end) / 1e3 / args.iters], dtype=torch.float64, device=device)
    dist.all_reduce(seconds)
    seconds = seconds.item() / n
    algbw = nbytes / seconds / 1e9
    if dist.get_rank() == 0:
        print(f"bare all_reduce {args.size_mib} MiB fp32, {n} ranks: time {seconds * 1e6:.1f} us, "
              f"algbw {algbw:.1f} GB/s, busbw {algbw * 2 * (n - 1) / n:.1f} GB/s", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
