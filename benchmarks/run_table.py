"""One line per run under a folder of Hydra job dirs: the overrides that vary, step time with its
p10 and p90, the host's dispatch time and the model's prediction (an inference run: TTFT and TPOT
beside theirs); gpu_evidence.sh's host and unseen-case suites.

    python benchmarks/run_table.py DIR [KEY_SUBSTRING ...]   (default keys: model, checkpointing)"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path


def shown_overrides(job: Path, keys: list[str]) -> str:
    overrides = job / ".hydra" / "overrides.yaml"
    if not overrides.exists():
        return ""
    lines = [x.strip("- ").strip() for x in overrides.read_text().splitlines()]
    return " ".join(x.split(".")[-1] for x in lines if any(k in x for k in keys))


def main() -> None:
    root, keys = Path(sys.argv[1]), sys.argv[2:] or ["model", "checkpointing"]
    for f in sorted(root.glob("*/*/results.json")):
        m = json.loads(f.read_text())["metrics"]
        ms = lambda k: 1e3 * m.get(k, math.nan)  # noqa: E731
        what = f"{f.parent.parent.name:14s} {shown_overrides(f.parent, keys):46s}"
        if "ttft_s" in m:  # an inference run
            print(f"{what} TTFT {ms('ttft_s'):8.3f} pred {ms('predicted_ttft_s'):8.3f} TPOT {ms('tpot_s'):7.3f} "
                  f"pred {ms('predicted_tpot_s'):7.3f} ms")
        else:
            print(f"{what} step {ms('step_time_s'):8.2f} p10 {ms('step_time_s_p10'):8.2f} p90 {ms('step_time_s_p90'):8.2f} "
                  f"host {ms('host_dispatch_s'):8.2f} ms pred {ms('predicted_step_time_s'):8.2f}")


if __name__ == "__main__":
    main()
