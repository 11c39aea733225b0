"""Key/value cache for autoregressive decoding: one preallocated buffer pair per attention layer.

Buffers are allocated up front (LayerKVCache.allocate) or on the first write, from the shapes the
layer produces, so a layer under tensor parallelism caches only its own heads and a pipeline
stage only its own layers.

Two ways to decode: by default each step attends over the filled part of the buffers (shapes
grow with the sequence); with a position tensor set (`KVCache.use_position`), a one-token step
writes at that position and attends over the whole buffers with positions past it masked, so
every step has the same shapes and can be captured once as a CUDA graph and replayed."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def check_room(end: int, max_len: int) -> None:
    """Writing positions up to `end` must fit the cache."""
    if end > max_len:
        raise ValueError(f"KV cache holds {max_len} positions and {end} were written: "
                         "raise the cache length (input_len + output_len)")


class LayerKVCache:
    """K and V of one layer, [batch, kv_heads, max_len, head_dim], filled up to `length`."""

    def __init__(self, max_len: int):
        self.max_len = max_len
        self.length = 0
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.position: torch.Tensor | None = None  # [1] on the device: the static-shape decode position

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Cache this call's k/v [batch, kv_heads, new, head_dim] and attend q over the sequence so far."""
        if self.position is None:
            return cached_causal_attention(q, *self.update(k, v))
        self.k.index_copy_(2, self.position, k)
        self.v.index_copy_(2, self.position, v)
        # The buffer's length, not max_len: a compiled step keeps it a dynamic size (one step for every length).
        visible = (torch.arange(self.k.shape[2], device=q.device) <= self.position)[None]  # [1 query, keys]
        return one_token_attention(q, self.k, self.v, visible)

    def allocate(self, batch: int, kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device) -> None:
        """The buffers, before the first write (a compiled prefill then never sees them missing)."""
        shape = (batch, kv_heads, self.max_len, head_dim)
        # Zeros, not empty: the static path attends over never-written positions too, and a
        # masked NaN/Inf left in the memory still turns the output into NaN.
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append k/v [batch, kv_heads, new, head_dim]; return every cached position so far."""
        end = self.length + k.shape[2]
        if self.k is None:
            check_room(end, self.max_len)
            self.allocate(k.shape[0], k.shape[1], k.shape[3], k.dtype, k.device)
        check_room(end, self.k.shape[2])  # the buffer's length: a compiled prefill keeps it dynamic
        self.k[:, :, self.length:end] = k
        self.v[:, :, self.length:end] = v
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]

    def nbytes(self) -> int:
        return 0 if self.k is None else self.k.nbytes + self.v.nbytes


class KVCache:
    """The caches of the layers one model (or pipeline stage) holds, keyed by layer name."""

    def __init__(self, layer_names: list[str], max_len: int):
        self.max_len = max_len
        self.layers = {name: LayerKVCache(max_len) for name in layer_names}

    def layer(self, name: str) -> LayerKVCache:
        return self.layers[name]

    @property
    def length(self) -> int:
        """Positions already cached (the same in every layer)."""
        return next(iter(self.layers.values())).length if self.layers else 0

    def reset(self) -> None:
        """Start a new sequence; the buffers are kept for reuse."""
        for cache in self.layers.values():
            cache.length = 0

    def use_position(self, position: torch.Tensor | None) -> None:
        """Static-shape decoding at the device-side `position` [1] (None: back to growing shapes)."""
        for cache in self.layers.values():
            cache.position = position

    def advance(self, new: int) -> None:
        """Count `new` positions written through the static path (which leaves `length` alone)."""
        for cache in self.layers.values():
            cache.length += new

    def nbytes(self) -> int:
        """Bytes allocated for the whole cache (max_len positions)."""
        return sum(cache.nbytes() for cache in self.layers.values())

    def bytes_per_position(self) -> int:
        """Bytes of K and V for one position of every sequence in the batch, over all layers."""
        return sum(c.nbytes() // c.max_len for c in self.layers.values() if c.k is not None)


def cached_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Attention of the newest q positions over all cached keys: causal aligned to the end
    (SDPA's is_causal aligns to the start, which is wrong once keys outnumber queries)."""
    q_len, k_len = q.shape[2], k.shape[2]
    if q_len == 1:  # one new token sees every cached position
        return one_token_attention(q, k, v)
    n_rep = q.shape[1] // k.shape[1]
    if n_rep > 1:
        k, v = (t.repeat_interleave(n_rep, dim=1) for t in (k, v))
    if q_len == k_len:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    from torch.nn.attention.bias import causal_lower_right  # loads torch._dynamo: only for chunked prefill

    return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(q_len, k_len))


def one_token_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        visible: torch.Tensor | None = None) -> torch.Tensor:
    """q [batch, heads, 1, head_dim] over k/v [batch, kv_heads, k_len, head_dim]: the query heads
    of each KV group become that group's query rows, so the cache is read once, not repeated.
    `visible` [1, k_len] (bool): the keys it may see (the static-shape path's mask)."""
    b, heads, _, d = q.shape
    kv_heads = k.shape[1]
    grouped = q.reshape(b, kv_heads, heads // kv_heads, d)
    return F.scaled_dot_product_attention(grouped, k, v, attn_mask=visible).reshape(b, heads, 1, d)
