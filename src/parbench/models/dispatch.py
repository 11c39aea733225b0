"""Count what a training step of each model family dispatches on the host (models/dispatch_table.py
says what the counts mean): a small CPU instance with the family's features (the dims shrunk, which
changes no op), at one and two layers under bf16 autocast as the train workload runs it; the
difference is one layer, the rest is the step's. `python -m parbench.models.dispatch` rewrites the
table for every conf/model/*.yaml."""

from __future__ import annotations

import dataclasses
import json
import sys

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from parbench.config.schema import ModelConfig, load_presets
from parbench.models.build import build_model
from parbench.models.dispatch_table import DISPATCH_FILE, dispatch_signature

SMALL = {"hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "ffn": 128, "vocab": 256, "max_seq_len": 64}


class CountCalls(TorchFunctionMode):
    """torch calls made from Python while active."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


class CountOps(TorchDispatchMode):
    """aten ops dispatched while active."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def small(m: ModelConfig, layers: int) -> ModelConfig:
    """The same family and features at toy dims (an MoE keeps its experts and top_k: its dispatch
    loops over them; a sliding window stays shorter than the sequence)."""
    window = {"sliding_window": 8} if m.sliding_window else {}
    kv = {"kv_heads": SMALL["heads"]} if m.kv_heads == m.heads else {}
    return dataclasses.replace(m, layers=layers, **{**SMALL, **kv, **window}, rope_scaling=None)


def step_counts(m: ModelConfig) -> tuple[int, int]:
    """(forward calls, backward ops) of one training step: forward and loss, then backward."""
    torch.manual_seed(0)
    model = build_model(m, "cpu")
    tokens = torch.randint(0, m.vocab, (2, 32))
    with CountCalls() as forward, torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(tokens).flatten(0, 1).float(), tokens.flatten())
    with CountOps() as backward:
        loss.backward()
    return forward.count, backward.count


def count(m: ModelConfig) -> dict[str, dict[str, int]]:
    """Per layer and per step, as the table holds them."""
    one, two = step_counts(small(m, 1)), step_counts(small(m, 2))
    layer = [b - a for a, b in zip(one, two)]
    step = [a - per for a, per in zip(one, layer)]
    names = ("forward_calls", "backward_ops")
    return {"per_layer": dict(zip(names, layer)), "per_step": dict(zip(names, step))}


def conf_models() -> dict[str, ModelConfig]:
    """Every conf/model/*.yaml with a fixed shape (hf reads its shape from a checkpoint), by name."""
    return load_presets("model", ModelConfig, skip="hf")


def table() -> dict[str, dict]:
    """One entry per signature among conf/model/*.yaml, and each family's base entry."""
    models = list(conf_models().values())
    bases = {m.family: dataclasses.replace(m, qk_norm=False, qkv_bias=False, experts=0, top_k=0, sliding_window=None)
             for m in models}
    entries = {dispatch_signature(m): m for m in [*bases.values(), *models]}
    return {key: count(m) for key, m in sorted(entries.items())}


def main() -> None:
    DISPATCH_FILE.write_text(json.dumps(table(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {DISPATCH_FILE} (torch {torch.__version__})", file=sys.stderr)


if __name__ == "__main__":
    main()
