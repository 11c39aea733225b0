"""A decode step captured as a CUDA graph, as vLLM and SGLang run decoding: one replay launches
every kernel of the step, so a batch-1 step costs its GPU time rather than the host's Python and
launch time (hundreds of small kernels per token for a 7B model).

The step must have the same shapes and buffers every time: the KV cache's static-shape path
(a position tensor, the whole buffers attended with later positions masked), a fixed batch, and
input/output tensors the graph owns. Tensor-parallel all_reduces run inside the graph (NCCL
supports capture); the pipeline's point-to-point transfers stay outside."""

from __future__ import annotations

from typing import Callable

import torch

from parbench.models.kv_cache import KVCache

Compute = Callable[..., torch.Tensor]  # (x, cache, sample, positions=...) -> hidden states or tokens


class DecodeGraph:
    """Captured on the first one-token step (after the prefill filled the cache), replayed after."""

    def __init__(self, compute: Compute):
        self.compute = compute
        self.graph: torch.cuda.CUDAGraph | None = None
        self.input = self.output = self.position = None

    def __call__(self, x: torch.Tensor, cache: KVCache, sample) -> torch.Tensor:
        if self.graph is None:
            self.capture(x, cache, sample)
        self.input.copy_(x)
        self.position.fill_(cache.length)
        cache.use_position(self.position)
        self.graph.replay()
        cache.use_position(None)
        cache.advance(1)
        return self.output

    def release(self) -> None:
        """Free the captured graph: NCCL cannot destroy a communicator while a graph that
        captured its collectives lives (the rank's teardown hung without this)."""
        if self.graph is not None:
            torch.cuda.synchronize()
            self.graph.reset()
            self.graph = self.input = self.output = self.position = None

    def capture(self, x: torch.Tensor, cache: KVCache, sample) -> None:
        """Warm up on a side stream (lazy initialisations must not be captured), then capture.
        Both write this step's k/v at its position, which the first replay writes again."""
        self.input = x.clone()
        self.position = torch.tensor([cache.length], device=x.device)
        cache.use_position(self.position)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.compute(self.input, cache, sample, positions=self.position)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.output = self.compute(self.input, cache, sample, positions=self.position)
        cache.use_position(None)
