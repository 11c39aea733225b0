"""SIGINT (Ctrl-C) and SIGTERM to the orchestrator: remembered, not raised mid-write, so the running
torchrun is ended by its supervisor, its run marked KILLED and the sweep's parent run closed.
A second signal gives up waiting and exits at once."""

from __future__ import annotations

import signal
import sys
import threading

HANDLED = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    def __init__(self) -> None:
        self.signal: signal.Signals | None = None
        self._installed = False

    def install(self) -> None:
        """Idempotent; only the main thread may set handlers (a sweep's jobs run there)."""
        if self._installed or threading.current_thread() is not threading.main_thread():
            return
        for sig in HANDLED:
            signal.signal(sig, self._handle)
        self._installed = True

    def _handle(self, signum: int, frame) -> None:
        if self.signal is not None:
            print(f"\nparbench: second {signal.Signals(signum).name}: exiting now", file=sys.stderr, flush=True)
            raise SystemExit(128 + signum)
        self.signal = signal.Signals(signum)
        print(f"\nparbench: {self.signal.name} received: ending the running job and closing its runs "
              "(again to exit at once)", file=sys.stderr, flush=True)

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signal) if self.signal else 0

    def reason(self) -> str:
        return (f"interrupted: parbench got {self.signal.name}; torchrun's processes were ended"
                if self.signal else "")


INTERRUPTS = Interrupts()
