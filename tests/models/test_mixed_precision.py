"""Every model family computes in the activation dtype under mixed precision: no op mixes a
parameter with an activation of another floating dtype (e.g. an fp32 norm weight with bf16 q/k,
which keeps torch's fused RMSNorm off: qwen3_1_7b trained at 22 % MFU against 36 % for
llama3_2_1b on an H100). Each conf/model config runs shrunk to a few layers, keeping what makes
its family (norms, qk_norm, experts, tied head)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import compose
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from parbench.models.build import build_model
from parbench.paths import CONF_DIR

HF_TINY = Path(__file__).parent / "hf_tiny"
# Every preset, and every family model=hf reads from a config.json (its tiny configs, already small).
MODELS = (sorted(p.stem for p in (Path(CONF_DIR) / "model").glob("*.yaml") if p.stem != "hf")
          + sorted(f"hf:{p.name}" for p in HF_TINY.iterdir()))
SHRINK = ["model.layers=2", "model.hidden=64", "model.heads=4", "model.ffn=96", "model.vocab=512",
          "model.max_seq_len=64"]


# What autocast casts to one dtype itself (low precision, or fp32 for layer_norm) before computing.
AUTOCAST_CASTS = {"linear", "matmul", "__matmul__", "mm", "bmm", "layer_norm"}


class MixedParameterOps(TorchFunctionMode):
    """Records each call that takes a parameter (or a view of one) beside a floating tensor of
    another dtype, where autocast does not cast them to one dtype: such a call computes between
    a full-precision weight and a low-precision activation (or leaves torch's fused kernel)."""

    def __init__(self, params: list[torch.Tensor]):
        super().__init__()
        self.storages = {p.untyped_storage().data_ptr() for p in params}
        self.found: set[str] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        tensors = [t for t in tree_leaves((args, kwargs or {})) if isinstance(t, torch.Tensor) and t.is_floating_point()]
        params = [t for t in tensors if t.untyped_storage().data_ptr() in self.storages]
        name = getattr(func, "__name__", str(func))
        cast_by_autocast = name in AUTOCAST_CASTS and torch.is_autocast_enabled("cpu")
        if params and len({t.dtype for t in tensors}) > 1 and not cast_by_autocast:
            self.found.add(f"{name} ({', '.join(str(t.dtype) for t in tensors)})")
        return func(*args, **(kwargs or {}))


def shrunk(model: str):
    if model.startswith("hf:"):
        return compose("model=hf", f"model.path={HF_TINY / model[3:]}", "hardware=cpu").model
    cfg = compose(f"model={model}", "hardware=cpu", *SHRINK).model
    cfg.kv_heads = 2 if cfg.kv_heads < cfg.heads else 4
    cfg.head_dim = None if cfg.head_dim is None else 16
    cfg.experts, cfg.top_k = (4, 2) if cfg.experts else (0, 0)
    return cfg


def mixed_ops(model: str, params_dtype: torch.dtype) -> set[str]:
    """Forward and backward of the shrunk model in bf16: autocast over fp32 parameters (what the
    single-device and DDP paths do), or parameters in bf16 (what FSDP2's param_dtype gives)."""
    cfg = shrunk(model)
    torch.manual_seed(0)
    net = build_model(cfg, "cpu").to(params_dtype)
    tokens = torch.randint(0, cfg.vocab, (2, 16))
    with MixedParameterOps(list(net.parameters())) as mode, torch.autocast("cpu", torch.bfloat16):
        net(tokens).float().logsumexp(-1).mean().backward()
    return mode.found


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("params_dtype", [torch.float32, torch.bfloat16])
def test_no_op_mixes_a_parameter_with_another_dtype(model, params_dtype):
    assert mixed_ops(model, params_dtype) == set()


def test_the_check_catches_an_fp32_norm_weight_beside_bf16_activations():
    """nn.RMSNorm as the q/k norms were before (the weight not cast to the input's dtype)."""
    from parbench.models import llama

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(llama.RMSNorm, "forward", torch.nn.RMSNorm.forward)
        assert any(op.startswith("rms_norm") for op in mixed_ops("qwen3_1_7b", torch.float32))
