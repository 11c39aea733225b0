"""Issue 31, 2026-12-07, call 3: what an event pair adds to a call timed by time_each (the calibration's matmul, attention
and element-wise runs): an empty pair under the same hold, and some of call 1's ops timed three ways: in a CUDA graph of
40 calls, back to back between one pair of events (time_batch: an eager program's steady state), and by events around
each call. One JSON line each.
    python docs/results/2026-12-07_tiny31/events.py > events.jsonl"""

import json
import statistics

from parbench.metrics.timing import time_batch, time_each, time_graphed
from tiny_ops import DEV, attention, gemm, rms_norm


def main() -> None:
    empty = statistics.median(time_each(lambda i: None, 40, DEV, warmup=5))
    print(json.dumps({"op": "empty event pair", "events_us": empty * 1e6}), flush=True)
    ops = {"gemm 256x64x64": gemm(256, 64, 64), "gemm 1024x1024x1024": gemm(1024, 1024, 1024),
           "gemm 4096x2048x2048": gemm(4096, 2048, 2048), "gemm 8192x4096x4096": gemm(8192, 4096, 4096),
           "sdpa 4x64 tiny": attention(4, 64, 4, 2, 16), "sdpa 4x2048 32/8x64": attention(4, 2048, 32, 8, 64),
           "rms_norm 256x64": rms_norm(256, 64)}
    for name, fn in ops.items():
        print(json.dumps({"op": name, "graph_us": time_graphed(fn, 40, 20) * 1e6,
                          "batch_us": time_batch(fn, 200, DEV, warmup=20) * 1e6,
                          "events_us": statistics.median(time_each(fn, 40, DEV, warmup=5)) * 1e6}), flush=True)


if __name__ == "__main__":
    main()
