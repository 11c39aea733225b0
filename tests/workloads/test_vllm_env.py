"""The vllm engine runs inside parbench's torchrun worker, and vLLM (0.26 on a GPU) sets up its own
process group with a tcp:// rendezvous on a fresh port. Under torchrun's environment
(TORCHELASTIC_USE_AGENT_STORE=True) torch only connects to that port as a client, to a store nobody
serves, and waits silently until the group's timeout: the stall seen on the GPU. The engine leaves
torchrun's environment first; these tests run the rendezvous in a fresh process both ways."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

RENDEZVOUS = """
import datetime, sys
import torch.distributed as dist
if sys.argv[2] == "leave":
    from parbench.workloads.inference.vllm_engine.run import leave_torchrun_env
    leave_torchrun_env()
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}", world_size=1, rank=0,
                        timeout=datetime.timedelta(seconds=2))
dist.destroy_process_group()
print("rendezvous done")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_env() -> dict[str, str]:
    """What torchrun gives each worker (torch.distributed.elastic's local agent)."""
    return {**os.environ, "TORCHELASTIC_USE_AGENT_STORE": "True", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "TORCHELASTIC_RUN_ID": "none"}


@pytest.mark.parametrize("env_for_vllm", ["leave", "keep"])
def test_vllms_tcp_rendezvous_completes_once_torchruns_env_is_left(env_for_vllm):
    proc = subprocess.run([sys.executable, "-c", RENDEZVOUS, str(free_port()), env_for_vllm], env=torchrun_env(),
                          capture_output=True, text=True, timeout=120)
    if env_for_vllm == "leave":
        assert proc.returncode == 0 and "rendezvous done" in proc.stdout, proc.stderr[-2000:]
    else:  # the trap itself: torch waits as a client until the timeout
        assert proc.returncode != 0 and "The client socket has timed out" in proc.stderr, proc.stderr[-2000:]
