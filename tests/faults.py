"""Faults injected at a named step of a publish (:data:`ndcg_spark.job.outputs.contract.at_step`).

In this process a test sets the hook itself (``monkeypatch.setattr(publish, "at_step", ...)``).
A job that must be killed or signalled runs in a process of its own, started as::

    python -m tests.faults STEP PAUSE_FILE -- JOB_ARGS...

which pauses the job at ``STEP`` (creating ``PAUSE_FILE`` once there) and otherwise runs it as
``ndcg-spark JOB_ARGS...`` does: same output, exit codes and signal handling.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Sequence

from ndcg_spark.job import entrypoint, interrupts
from ndcg_spark.job.outputs import contract


def failing_at(step: str) -> Callable[[str], None]:
    """A hook that fails the run with an I/O error at ``step``."""

    def hook(at: str) -> None:
        if at == step:
            raise OSError(f"injected I/O failure at {at}")

    return hook


def pausing_at(step: str, pause_file: str) -> Callable[[str], None]:
    """A hook that stops the run at ``step``, creating ``pause_file`` once there, until killed."""

    def hook(at: str) -> None:
        if at != step:
            return
        with open(pause_file, "w") as fh:
            fh.write(at)
        # A SIGTERM or SIGINT lets the run go on, to stop as the contract allows.
        while interrupts.received() is None:
            time.sleep(0.1)

    return hook


def main(argv: Sequence[str]) -> None:
    step, pause_file, separator, *job = argv
    if separator != "--":
        raise SystemExit("usage: python -m tests.faults STEP PAUSE_FILE -- JOB_ARGS...")
    contract.at_step = pausing_at(step, pause_file)
    sys.argv = [sys.argv[0], *job]
    entrypoint()


if __name__ == "__main__":
    main(sys.argv[1:])
