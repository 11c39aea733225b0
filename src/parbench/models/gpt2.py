"""GPT-2: learned positions, pre-LayerNorm with biases, GELU MLP, tied output head."""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from parbench.config.schema import ModelConfig
from parbench.models.build import embedding, init_dense
from parbench.models.llama import INIT_STD, Attention


class MLP(nn.Module):
    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.w1 = nn.Linear(hidden, ffn)
        self.w2 = nn.Linear(ffn, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.gelu(self.w1(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attention_norm = nn.LayerNorm(cfg.hidden, eps=cfg.norm_eps)
        self.attention = Attention(cfg, bias=True)
        self.ffn_norm = nn.LayerNorm(cfg.hidden, eps=cfg.norm_eps)
        self.feed_forward = MLP(cfg.hidden, cfg.ffn)

    def forward(self, x: torch.Tensor, rope: None = None) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), None)
        return h + self.feed_forward(self.ffn_norm(h))


class GPT2(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = embedding(cfg.vocab, cfg.hidden)
        self.pos_embeddings = embedding(cfg.max_seq_len, cfg.hidden)
        self.layers = nn.ModuleDict({str(i): GPT2Block(cfg) for i in range(cfg.layers)})
        self.norm = nn.LayerNorm(cfg.hidden, eps=cfg.norm_eps)
        self.output = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        if cfg.tie_embeddings:
            self.output.weight = self.tok_embeddings.weight
        if self.output.weight.device.type != "meta":
            self.init_weights()

    @torch.no_grad()
    def init_weights(self) -> None:
        for module in self.modules():
            init_dense(module, partial(nn.init.normal_, std=INIT_STD))

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        if self.tok_embeddings is not None:
            if positions is None:
                positions = torch.arange(tokens.shape[1], device=tokens.device)
            h = self.tok_embeddings(tokens) + self.pos_embeddings(positions)
        else:
            h = tokens
        for layer in self.layers.values():
            h = layer(h)
        h = self.norm(h) if self.norm is not None else h
        return self.output(h) if self.output is not None else h
