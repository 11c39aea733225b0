"""Does the first point of a sweep pay one-time costs inside its measured steps? Runs the tiny
model's training step (AdamW, batch 4 x 64 tokens, the default workload) in N fresh processes one
after the other, as a sweep's points run, and prints each step's wall time and CPU time. CPU time
(one intra-op thread, so no spinning threads) is what another user's load does not change: a step
that does extra work (lazy initialisation, page faults, imports) shows it there.

    python benchmarks/first_point.py [processes=4] [warmup=2] [steps=8]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time


def one_process(warmup: int, steps: int) -> dict:
    import torch

    from parbench.config.schema import ModelConfig
    from parbench.models.build import build_model

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = ModelConfig(name="tiny", family="llama", layers=2, hidden=64, heads=4, kv_heads=2, ffn=176, vocab=512,
                      max_seq_len=256)
    model = build_model(cfg, "cpu")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    rows = []
    for step in range(warmup + steps):
        tokens = torch.randint(0, cfg.vocab, (4, 65))
        wall, cpu = time.perf_counter(), time.process_time()
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        rows.append({"step": step, "wall_ms": 1e3 * (time.perf_counter() - wall),
                     "cpu_ms": 1e3 * (time.process_time() - cpu)})
    return {"rows": rows}


def main(processes: int, warmup: int, steps: int) -> None:
    for point in range(processes):
        out = subprocess.run([sys.executable, __file__, "--child", str(warmup), str(steps)], capture_output=True,
                             text=True, check=True).stdout
        rows = json.loads(out.splitlines()[-1])["rows"]
        measured = rows[warmup:]
        print(f"point {point}: warm-up cpu ms {[round(r['cpu_ms'], 1) for r in rows[:warmup]]}, measured cpu ms "
              f"median {statistics.median(r['cpu_ms'] for r in measured):.2f} max {max(r['cpu_ms'] for r in measured):.2f}; "
              f"wall ms median {statistics.median(r['wall_ms'] for r in measured):.2f} "
              f"max {max(r['wall_ms'] for r in measured):.2f}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(one_process(int(sys.argv[2]), int(sys.argv[3]))))
    else:
        main(*(int(a) for a in (sys.argv[1:] + ["4", "2", "8"][len(sys.argv[1:]):])))
