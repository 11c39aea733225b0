"""workload.compile: torch.compile of every block and of the loss computes what eager does."""

from __future__ import annotations

import pytest
from test_strategies_tp_cp import TRAIN, single_process_losses


@pytest.mark.slow
def test_compiled_fsdp_matches_eager_single_process(cli, tmp_path):
    reference = single_process_losses(tmp_path / "eager")
    # The reference's 4 sequences per step, 2 on each fsdp rank.
    cli.run(*TRAIN, "parallel=fsdp", "workload.global_batch_size=4", "workload.compile=true")
    # Inductor fuses and reorders fp32 reductions: equal to rounding, not bit for bit.
    assert cli.losses() == pytest.approx(reference, rel=1e-4)
