"""What a checkpointed layer adds to a step's host time, by family and mode, on a CPU where the kernels are negligible
(each family at toy widths, models/dispatch.py's `small`, 1 x 16 tokens, one thread): the step at 4 and at 2 layers,
the difference halved, without checkpointing, selective and full. Usage (repo root): python replay_by_ops_cpu.py"""
import statistics
import time

import torch
import torch.nn.functional as F

from parbench.models.dispatch import small, conf_models
from parbench.models.build import build_model
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from parbench.parallel.activation_checkpoint import _selective_context
torch.set_num_threads(1)
ms = conf_models()
def step_time(m, layers, mode):
    torch.manual_seed(0)
    model = build_model(small(m, layers), "cpu"); model.init_weights()
    if mode != "none":
        for n, b in list(model.layers.items()):
            model.layers[n] = checkpoint_wrapper(b, preserve_rng_state=False, **({"context_fn": _selective_context} if mode == "selective" else {}))
    tokens = torch.randint(0, 256, (1, 16))
    ts = []
    for i in range(40):
        t = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(tokens).flatten(0, 1).float(), tokens.flatten())
        loss.backward()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts[10:])
for name in ("llama3_2_1b", "gpt2_xl", "qwen3_1_7b", "moe_2_5b"):
    m = ms[name]
    per = {mode: (step_time(m, 4, mode) - step_time(m, 2, mode)) / 2 * 1e3 for mode in ("none", "selective", "full")}
    print(name, {k: round(v, 3) for k, v in per.items()}, "sel extra", round(per["selective"] - per["none"], 3), "full extra", round(per["full"] - per["none"], 3))
