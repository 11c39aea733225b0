"""How many operations the host dispatches for one layer and for the rest of a training step, by
model family and the features that change a block's code (q/k norms, biases, experts, a sliding
window), read without torch: the predictor's host-dispatch units (predict/host.py). The table
(dispatch_counts.json beside this file) is counted from the models themselves by
`python -m parbench.models.dispatch`, and tests/predict/test_host_dispatch.py checks it against a fresh
count for every conf/model/*.yaml.

    forward_calls   torch calls the Python forward makes (functions, tensor methods, modules' F.*):
                    each pays Python, the dispatcher and a launch; a checkpointed block replays them
                    in the backward
    backward_ops    aten ops the autograd engine dispatches in the backward (C++, no Python)"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from parbench.config.schema import ModelConfig

DISPATCH_FILE = Path(__file__).with_name("dispatch_counts.json")


@dataclass(frozen=True)
class Dispatch:
    forward_calls: float
    backward_ops: float


@dataclass(frozen=True)
class FamilyDispatch:
    """One block's dispatch, and the step's outside the blocks (embedding, final norm, head, loss)."""

    per_layer: Dispatch
    per_step: Dispatch
    signature: str  # the table's entry these are (the model's own, or its family's base where missing)


def dispatch_signature(m: ModelConfig) -> str:
    """The table's key: the family and the features that change what a block dispatches."""
    features = [f for on, f in ((m.qk_norm, "qk_norm"), (m.qkv_bias, "qkv_bias"),
                                (m.experts, f"moe{m.experts}x{m.top_k}"), (m.sliding_window, "window")) if on]
    return "+".join([m.family, *features])


@cache
def _table() -> dict[str, dict]:
    return json.loads(DISPATCH_FILE.read_text()) if DISPATCH_FILE.exists() else {}


def family_dispatch(m: ModelConfig) -> FamilyDispatch | None:
    """This model's counts; where the table lacks its features, an MoE's another MoE entry of its family (its grouped
    layer dispatches about alike whatever its experts: 4 of top-2 and 8 of top-2 count the same), else its family's
    base entry; None where the table knows none of them (the predictor then uses the calibration's per-layer figure)."""
    table = _table()
    moe = sorted(k for k in table if m.experts and k.startswith(f"{m.family}+moe"))
    for key in (dispatch_signature(m), *moe, m.family):
        if key in table:
            entry = table[key]
            return FamilyDispatch(Dispatch(**entry["per_layer"]), Dispatch(**entry["per_step"]), key)
    return None
