"""The prefill replayed as a CUDA graph, as vLLM replays its batches (decode and prefill) up to its
largest capture size.

Every batch of a native-engine run prefills the same shape (batch_size x input_len) into an empty
KV cache, so its kernels and buffers are the same each time: the first prefill (in the warm-up
batch) captures them and later ones replay the graph. A small prefill then costs its GPU time
rather than the host's launch time: launched op by op, a 1B Llama's 512-token prefill waits on the
host's dispatch (docs/results/2026-11-25_host_gpu31.md: TTFT 24-30 % above its kernels' time, and
up to 2x apart between two machines of one kind). The graph's memory pool keeps the prefill's
activations reserved for the run (about 30 MB for a 1B Llama's 512 tokens); prefills of more than
MAX_TOKENS tokens are launched as before: their kernels outlast the dispatch, and their activations
would be large to keep. workload.prefill_graph=false launches every prefill."""

from __future__ import annotations

import torch

from parbench.models.kv_cache import KVCache
from parbench.workloads.inference.decode_step import Compute, Sample, capture_graph, release_graph
from parbench.workloads.specs.inference import PREFILL_GRAPH_MAX_TOKENS as MAX_TOKENS


class PrefillGraph:
    """A prefill into an empty cache: captured on the first call, replayed for later calls of that
    shape and cache (another shape or cache is captured anew, the old graph freed). The replay runs
    the captured kernels, the sampling among them."""

    def __init__(self, compute: Compute):
        self.compute = compute
        self.graph: torch.cuda.CUDAGraph | None = None
        self.cache: KVCache | None = None
        self.input = self.output = None

    @staticmethod
    def covers(x: torch.Tensor, cache: KVCache | None) -> bool:
        """A prefill (the cache empty) of at most MAX_TOKENS tokens."""
        return cache is not None and cache.length == 0 and x.shape[0] * x.shape[1] <= MAX_TOKENS

    def __call__(self, x: torch.Tensor, cache: KVCache, sample: Sample) -> torch.Tensor:
        if cache.length:  # the captured kernels write from position 0
            raise RuntimeError(f"a prefill graph writes an empty KV cache; this one holds {cache.length} positions")
        if self.graph is None or cache is not self.cache or x.shape != self.input.shape:
            self.capture(x, cache, sample)
        self.input.copy_(x)
        self.graph.replay()
        cache.advance(x.shape[1])  # the lengths the captured forward counted, reset after capture
        return self.output

    def capture(self, x: torch.Tensor, cache: KVCache, sample: Sample) -> None:
        """The warm-up writes the cache from position 0 and it and the capture advance its lengths;
        the lengths are reset after each, so the replay's writes are the ones that count."""
        self.release()
        self.input = x.clone()

        def prefill() -> torch.Tensor:
            cache.reset()
            return self.compute(self.input, cache, sample)

        self.graph, self.output = capture_graph(prefill)
        cache.reset()
        self.cache = cache

    def release(self) -> None:
        """Free the captured graph (before the process group is destroyed: it may hold NCCL work)."""
        release_graph(self.graph)
        self.graph = self.cache = self.input = self.output = None
