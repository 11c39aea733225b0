"""Failure reasons from torchrun's failure summary: the rank killed from outside outranks its peers'
errors, and out-of-memory failures carry the plan's estimate beside the capacity."""

from __future__ import annotations

from parbench.launch.diagnose import MemoryFacts, failure_reason

# torchrun 2.13's summary after `kill -9` of rank 1 (its peer's gloo error comes first).
SIGKILL_SUMMARY = """\
Failures:
[1]:
  time      : 2026-11-24_00:21:54
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 8173)  (SIGTERM)
  error_file: /tmp/torchelastic_x/attempt_0/0/error.json
  traceback : Traceback (most recent call last):
    File "/work/src/parbench/worker.py", line 28, in main
  RuntimeError: [../gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:17306: Connection reset by peer. GLHF!

------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-24_00:21:54
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 8175)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 8175
============================================================
"""
CUDA_OOM_SUMMARY = SIGKILL_SUMMARY.replace("""  exitcode  : -9 (pid: 8175)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 8175""", """  exitcode  : 1 (pid: 8175)
  error_file: /tmp/torchelastic_x/attempt_0/1/error.json
  traceback : Traceback (most recent call last):
    File "/work/src/parbench/workloads/train.py", line 240, in run
  torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 1 has a total capacity of 79.19 GiB""")
MEMORY = MemoryFacts(estimate_gb=61.5, capacity_gb=80.0, where="device")


def test_failure_reason_names_the_killed_rank_not_its_peers_noise():
    reason = failure_reason(SIGKILL_SUMMARY, 1)
    assert reason.startswith("rank 1 was killed by SIGKILL (exit code -9, pid 8175)")
    assert "Connection reset by peer" in reason.split("(then ")[1]  # the peer's error only as a consequence


def test_out_of_memory_reasons_carry_the_plan_estimate(monkeypatch):
    cuda = failure_reason(CUDA_OOM_SUMMARY, 1, MEMORY)
    assert cuda.startswith("CUDA out of memory on rank 1: torch.OutOfMemoryError: CUDA out of memory.")
    assert "plan estimate 61.50 GB per device, device capacity 80.0 GB" in cuda
    # A SIGKILL whose pid the kernel log names as OOM-killed is a host OOM-kill.
    monkeypatch.setattr("parbench.launch.diagnose.oom_killed_pids", lambda: {8175})
    host = failure_reason(SIGKILL_SUMMARY, 1, MemoryFacts(0.01, 23.4, "host"))
    assert host.startswith("host out of memory: rank 1 (pid 8175) was OOM-killed (SIGKILL; kernel log)")
    assert "host capacity 23.4 GB" in host
