"""Which of the workers' output lines reach the terminal. Everything goes to worker.log; the
terminal gets the progress lines, not torchrun's teardown: its agent's log lines, the ranks'
error dumps ("[rank0]: Traceback ...") and, once torchrun reports a failed rank or the job is being
ended, its own tracebacks (ChildFailedError, SignalException). The one-line reason comes after."""

from __future__ import annotations

import re

# Kineto's start/stop marker of every profiler window, printed with or without its own newline; two
# ranks' markers can interleave ("USDTUSDT:<first>:<second>"), each then without its "USDT".
KINETO_MARKER = re.compile(r"(?:USDT)*:\d{4}-\d\d-\d\d [\d:]+ \d+:\d+ \w+\.cpp:\d+\] profiler_\w+")
RANK_DUMP = re.compile(r"^\[rank\d+\]:")
AGENT_LOG = re.compile(r"^[EWI]\d{4} [\d:.]+ +\d+ torch/distributed/")
AGENT_FAILED = re.compile(r"failed \(exitcode: |SignalException|ChildFailedError")


class Console:
    """Filters one job's output lines; `silence()` when the job is being ended."""

    def __init__(self) -> None:
        self.quiet = False

    def silence(self) -> None:
        self.quiet = True

    def shown(self, line: str) -> str | None:
        """The line (Kineto's markers cut out) as the terminal should see it, or None."""
        if self.quiet:
            return None
        if AGENT_LOG.match(line) or RANK_DUMP.match(line):
            self.quiet = self.quiet or bool(AGENT_FAILED.search(line))
            return None
        cleaned = KINETO_MARKER.sub("", line)
        return None if cleaned.strip() == "" and line.strip() != "" else cleaned
