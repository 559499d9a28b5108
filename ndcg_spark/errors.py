"""Errors with the exit codes the job maps them to.

The job prints ``str(error)`` as one line on stderr and exits with ``error.exit_code``.
"""

from __future__ import annotations

#: Exit codes of the ``ndcg-spark`` command and ``jobs/evaluate_ndcg.py``.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_CONFIG = 2
EXIT_INPUT = 3
EXIT_QUALITY_GATE = 4
EXIT_LOCKED = 5

#: Prefix of messages raised inside Spark (``raise_error``) so the job can recognise them.
INPUT_ERROR_TAG = "NDCG_INVALID_INPUT"


class NdcgError(Exception):
    """Base class of the errors this package raises on purpose."""

    exit_code = EXIT_FAILURE


class ConfigError(NdcgError, ValueError):
    """A bad option, flag or config file (exit code 2)."""

    exit_code = EXIT_CONFIG


class InputDataError(NdcgError, ValueError):
    """Input tables that cannot be evaluated as they are (exit code 3)."""

    exit_code = EXIT_INPUT


class QualityGateFailed(NdcgError):
    """Outputs were written, but a ``--fail-below`` threshold was not met (exit code 4)."""

    exit_code = EXIT_QUALITY_GATE


class OutputLocked(NdcgError):
    """Another run holds the lock of the output (or partition) this run would write (exit code 5)."""

    exit_code = EXIT_LOCKED
