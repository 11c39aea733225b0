"""torchrun started before it is needed. A torchrun spends its first seconds importing torch (2.5 s on
a 2-core CPU, 2-6 s on a GPU host) before it starts a rank. A prestarted torchrun does that while the
orchestrator checks the sweep, opens the MLflow store or logs the previous point, then waits for its
command line on stdin. Every point still gets a torchrun process of its own (failure isolation): the
process only started earlier. launch.prestart=false launches each torchrun when its point begins."""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


class Prestarted:
    """At most one torchrun waiting for its command; the orchestrator's torchrun_command runs in it.
    Used from the main thread only: the parent-death signal (die_with_parent) follows the thread
    that started the process, not the process."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        """Start a torchrun that imports torch and waits (no-op if one is waiting)."""
        from parbench.launch.processes import start_supervised

        if self.proc is not None and self.proc.poll() is None:
            return
        self.proc = start_supervised([sys.executable, "-m", "parbench.launch.prestart"],
                                     {**os.environ, "PYTHONUNBUFFERED": "1"}, stdin=subprocess.PIPE)

    def take(self, cmd: list[str], env: dict[str, str]) -> subprocess.Popen | None:
        """The waiting torchrun, now running `cmd` with `env`; None if there is none (or it died)."""
        proc, self.proc = self.proc, None
        if proc is None or cmd[:len(TORCHRUN)] != TORCHRUN:
            self.stop(proc)
            return None
        try:
            proc.stdin.write(json.dumps({"argv": cmd[len(TORCHRUN):], "env": env, "cwd": os.getcwd()}) + "\n")
            proc.stdin.close()
        except OSError:  # it exited (killed, or torch failed to import): the caller starts a fresh one
            self.stop(proc)
            return None
        return proc

    def stop(self, proc: subprocess.Popen | None = None) -> None:
        """End a waiting torchrun that will not be used (it has run nothing: a kill loses nothing)."""
        proc = proc or self.proc
        if proc is self.proc:
            self.proc = None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


PRESTARTED = Prestarted()
atexit.register(PRESTARTED.stop)


def serve() -> None:
    """The prestarted process: import torchrun, then run the one command the orchestrator sends."""
    from torch.distributed import run

    line = sys.stdin.readline()
    if not line:  # not needed after all
        return
    job = json.loads(line)
    os.environ.clear()
    os.environ.update(job["env"])
    os.chdir(job["cwd"])
    sys.argv = ["torchrun", *job["argv"]]
    run.main(job["argv"])


if __name__ == "__main__":
    serve()
