"""A decode step captured as a CUDA graph, as vLLM and SGLang run decoding: one replay launches
every kernel of the step, so a batch-1 step costs its GPU time rather than the host's Python and
launch time (hundreds of small kernels per token for a 7B model).

The step must have the same shapes and buffers every time: the KV cache's static-shape path
(a position tensor, the whole buffers attended with later positions masked), a fixed batch, and
input/output tensors the graph owns. Tensor-parallel all_reduces run inside the graph (NCCL
supports capture). Each step attends over all input_len + output_len cache positions (later
ones masked), where vLLM's paged attention reads only the filled ones."""

from __future__ import annotations

from typing import Callable

import torch

from parbench.models.kv_cache import KVCache, check_room

Compute = Callable[..., torch.Tensor]  # (x, cache, sample, positions=...) -> hidden states or tokens
Sample = Callable[[torch.Tensor], torch.Tensor]  # logits -> token ids


class DecodeGraph:
    """Captured on the first one-token step (after the prefill filled the cache), replayed after
    with the same batch and cache."""

    def __init__(self, compute: Compute):
        self.compute = compute
        self.graph: torch.cuda.CUDAGraph | None = None
        self.cache: KVCache | None = None
        self.input = self.output = self.position = None

    def __call__(self, x: torch.Tensor, cache: KVCache, sample: Sample) -> torch.Tensor:
        if self.graph is None:
            self.capture(x, cache, sample)
        self.check_replayable(x, cache)
        # A replay runs the captured kernels only: the cache's static mode mattered at capture.
        self.input.copy_(x)
        self.position.fill_(cache.length)
        self.graph.replay()
        cache.advance(1)
        return self.output

    def check_replayable(self, x: torch.Tensor, cache: KVCache) -> None:
        """The graph writes into the buffers it was captured with, at a position past the prompt."""
        if cache is not self.cache or x.shape != self.input.shape:
            raise RuntimeError(f"the decode graph was captured for input {tuple(self.input.shape)} and another "
                               f"KV cache; got {tuple(x.shape)}: decode every batch with one batch size and cache")
        check_room(cache.length + 1, cache.max_len)

    def release(self) -> None:
        """Free the captured graph: NCCL cannot destroy a communicator while a graph that
        captured its collectives lives (the rank's teardown hung without this)."""
        if self.graph is not None:
            torch.cuda.synchronize()
            self.graph.reset()
            self.graph = self.cache = self.input = self.output = self.position = None

    def capture(self, x: torch.Tensor, cache: KVCache, sample: Sample) -> None:
        """Warm up on a side stream (lazy initialisations must not be captured), then capture.
        The warm-up writes this step's k/v at its position; the first replay writes them again."""
        self.input = x.clone()
        self.position = torch.tensor([cache.length], device=x.device)
        cache.use_position(self.position)
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self.compute(self.input, cache, sample, positions=self.position)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.output = self.compute(self.input, cache, sample, positions=self.position)
        finally:
            cache.use_position(None)
        self.graph, self.cache = graph, cache
