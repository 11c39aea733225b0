"""Decode steps of fixed shapes, as vLLM, SGLang and gpt-fast run decoding. The KV cache's
static-shape path (a device-side position tensor; the whole buffers attended, later positions
masked) gives every one-token step the same shapes and buffers, so a step can be

- compiled by torch.compile, one transformer block at a time (regional compilation: one compiled
  graph serves every layer; inductor fuses the norms, RoPE, SwiGLU and the cache write between the
  matmuls: hundreds of small kernels per token become a few per layer), and
- captured once as a CUDA graph and replayed: one launch runs every kernel of the step, so a
  batch-1 step costs its GPU time rather than the host's Python and launch time.

Tensor-parallel all_reduces run inside the graph (NCCL supports capture). Each step attends
over all input_len + output_len cache positions (later ones masked), where vLLM's paged
attention reads only the filled ones."""

from __future__ import annotations

import functools
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import torch
from torch import nn

from parbench.models.kv_cache import KVCache, LayerKVCache, check_room

Compute = Callable[..., torch.Tensor]  # (x, cache, sample, positions=...) -> hidden states or tokens
Sample = Callable[[torch.Tensor], torch.Tensor]  # logits -> token ids
Rope = tuple[torch.Tensor, torch.Tensor] | None  # a block's RoPE cos/sin tables (GPT-2: None)


@dataclass(frozen=True)
class DecodeOptions:
    """How one-token decode steps run; all off is the reference path (growing cache shapes,
    separate projections, op by op)."""

    fuse: bool = False  # q/k/v and gate/up as one matmul each (llama.fuse_projections)
    static_shapes: bool = False  # one-token steps through the static-shape path (implied by the two below)
    compile: bool = False  # torch.compile of the transformer blocks (decode steps and prefill): compile_blocks
    graph: bool = False  # the static-shape step replayed as a CUDA graph
    prefill_graph: bool = False  # prefills of up to prefill_graph.MAX_TOKENS replayed as CUDA graphs too

    @property
    def static(self) -> bool:
        return self.static_shapes or self.compile or self.graph


def decode_options(mode: str, device_type: str, prefill_graph: bool = True) -> DecodeOptions:
    """The options of a resolved workload.decode_mode (not auto) on `device_type`. `compile` replays
    its compiled step as a CUDA graph where there is one (compiling with mode="reduce-overhead"
    would not: inductor's graph trees skip steps that write into inputs, and the KV cache is one).
    Where decode steps are graphs, so are prefills, unless `prefill_graph` is off."""
    on_cuda = device_type == "cuda"
    return {"eager": DecodeOptions(),
            "graph": DecodeOptions(fuse=True, graph=True, prefill_graph=prefill_graph),
            "compile": DecodeOptions(fuse=True, compile=True, graph=on_cuda,
                                     prefill_graph=on_cuda and prefill_graph)}[mode]


def compile_blocks(blocks: Iterable[nn.Module], on: bool = True, backend: str = "inductor") -> None:
    """Regional compilation: every transformer block's forward runs through one torch.compile'd
    function (on=False: eager again). Dynamo takes a block's parameters and KV-cache buffers as
    inputs (inline_inbuilt_nn_modules) and guards on their shapes, not on which block holds them,
    so one compiled prefill and one compiled decode step serve every layer: compile time does not
    grow with the number of layers, and the compile cache keeps two small graphs. Embedding,
    final norm, head and sampling run eagerly (a few kernels per step, inside the CUDA graph)."""
    for block in blocks:
        block.__dict__.pop("forward", None)  # the class's forward again
        if on:
            block.forward = functools.partial(run_compiled_block, compiled_block_forward(backend), block)


def block_forward(block: nn.Module, x: torch.Tensor, rope: Rope, cache: LayerKVCache | None = None) -> torch.Tensor:
    """The block's class's forward (the instance's own `forward` is the compiled wrapper)."""
    return type(block).forward(block, x, rope, cache=cache)


@functools.cache
def compiled_block_forward(backend: str) -> Callable[..., torch.Tensor]:
    """One compiled function per backend for the whole process: dynamo keeps its graphs per code
    object and compiler, so switching compilation off and on (the verify pass) compiles nothing again.
    Without fullgraph, a collective dynamo cannot trace becomes a graph break, not an error."""
    return torch.compile(block_forward, backend=backend, dynamic=None)


def run_compiled_block(step: Callable[..., torch.Tensor], block: nn.Module, x: torch.Tensor, rope: Rope = None,
                       cache: LayerKVCache | None = None) -> torch.Tensor:
    """A block's forward through `step`; a prefill's length (dim 1 of the hidden states, dim 0 of the
    RoPE tables) is marked dynamic first, so one compiled prefill serves every prompt length. The
    KV cache's length is marked once per cache (mark_lengths_dynamic)."""
    if x.shape[1] > 1:
        import torch._dynamo  # only when compiling: loads the compiler

        torch._dynamo.mark_dynamic(x, 1)
        for table in rope or ():
            torch._dynamo.mark_dynamic(table, 0)
    return step(block, x, rope, cache)


def mark_lengths_dynamic(cache: KVCache) -> None:
    """The KV cache's length (dim 2 of every buffer) as a dynamic dimension of the blocks compiled
    from now on: the step compiled for one input/output length serves every other (and a later
    process loads it from the compile cache, workloads/compile_cache.py); the batch and every other
    size stay static."""
    import torch._dynamo

    for layer in cache.layers.values():
        for buffer in (layer.k, layer.v):
            torch._dynamo.mark_dynamic(buffer, 2)


@contextmanager
def static_position(cache: KVCache, position: torch.Tensor) -> Iterator[None]:
    cache.use_position(position)
    try:
        yield
    finally:
        cache.use_position(None)


class StaticDecodeStep:
    """One-token decode steps through the static-shape cache path (its blocks compiled or not), replayed
    as a CUDA graph (`graph`: captured on the first step after the prefill filled the cache,
    replayed after with the same batch and cache) or launched op by op."""

    def __init__(self, compute: Compute, graph: bool = False):
        self.compute = compute
        self.use_graph = graph
        self.graph: torch.cuda.CUDAGraph | None = None
        self.cache: KVCache | None = None
        self.input = self.output = self.position = None

    def __call__(self, x: torch.Tensor, cache: KVCache, sample: Sample) -> torch.Tensor:
        if not self.use_graph:
            return self.launch(x, cache, sample)
        if self.graph is None:
            self.capture(x, cache, sample)
        self.check_replayable(x, cache)
        # A replay runs the captured kernels only: the cache's static mode mattered at capture.
        self.input.copy_(x)
        self.position.fill_(cache.length)
        self.graph.replay()
        cache.advance(1)
        return self.output

    def launch(self, x: torch.Tensor, cache: KVCache, sample: Sample) -> torch.Tensor:
        """The static step launched op by op (or as the compiled code's kernels)."""
        check_room(cache.length + 1, cache.max_len)
        if self.position is None:
            self.position = torch.zeros(1, dtype=torch.long, device=x.device)
        self.position.fill_(cache.length)
        with static_position(cache, self.position):
            out = self.compute(x, cache, sample, positions=self.position)
        cache.advance(1)
        return out

    def check_replayable(self, x: torch.Tensor, cache: KVCache) -> None:
        """The graph writes into the buffers it was captured with, at a position past the prompt."""
        if cache is not self.cache or x.shape != self.input.shape:
            raise RuntimeError(f"the decode graph was captured for input {tuple(self.input.shape)} and another "
                               f"KV cache; got {tuple(x.shape)}: decode every batch with one batch size and cache")
        check_room(cache.length + 1, cache.max_len)

    def release(self) -> None:
        """Free the captured graph (release_graph)."""
        release_graph(self.graph)
        self.graph = self.cache = self.input = self.output = self.position = None

    def capture(self, x: torch.Tensor, cache: KVCache, sample: Sample) -> None:
        """Capture after a warm-up (capture_graph). The warm-up writes this step's k/v at its
        position; the first replay writes them again."""
        self.input = x.clone()
        self.position = torch.tensor([cache.length], device=x.device)
        with static_position(cache, self.position):
            self.graph, self.output = capture_graph(
                lambda: self.compute(self.input, cache, sample, positions=self.position))
        self.cache = cache


def capture_graph(run: Callable[[], torch.Tensor]) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """`run` once on a side stream (lazy initialisations and compilation must not be captured),
    then captured as a CUDA graph; the graph and the output tensor its replays write."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        output = run()
    return graph, output


def release_graph(graph: torch.cuda.CUDAGraph | None) -> None:
    """Free a captured graph, if any: NCCL cannot destroy a communicator while a graph that captured
    its collectives lives (the rank's teardown hung without this)."""
    if graph is not None:
        torch.cuda.synchronize()
        graph.reset()
