"""The evaluation job: config (TOML + flags) -> read -> evaluate -> write.

:mod:`~ndcg_spark.job.settings` declares every setting once, :mod:`~ndcg_spark.job.flags` reads
the TOML file and the flags, :mod:`~ndcg_spark.job.config` makes them the typed config of each
command (:mod:`~ndcg_spark.job.targets`: where it writes and logs), :mod:`~ndcg_spark.job.storage` reads and writes,
:mod:`~ndcg_spark.job.publish` makes a run's result visible (layout, lock, staging, marker),
:mod:`~ndcg_spark.job.pipeline` wires a run, :mod:`~ndcg_spark.job.gates` parses the gates
(one model for the three kinds), :mod:`~ndcg_spark.job.checks` holds them,
:mod:`~ndcg_spark.job.verdict` words them,
:mod:`~ndcg_spark.job.result` is a run's result as one typed value (its JSON is the manifest),
:mod:`~ndcg_spark.job.regression` holds a run against the previous one,
:mod:`~ndcg_spark.job.history` reads the runs of an output from their manifests,
:mod:`~ndcg_spark.job.tracking` logs a run to MLflow, :mod:`~ndcg_spark.job.console` prints,
:mod:`~ndcg_spark.job.exits` gives each failure its exit code (one table, by the error's condition)
and :mod:`~ndcg_spark.job.cli` is the entry point.
"""

from ndcg_spark.job.cli import entrypoint, run
from ndcg_spark.job.config import CompareConfig, EvaluateConfig, parse_config
from ndcg_spark.job.flags import load_toml
from ndcg_spark.job.pipeline import compare_main, main
from ndcg_spark.job.result import RunResult

__all__ = [
    "CompareConfig",
    "EvaluateConfig",
    "RunResult",
    "compare_main",
    "entrypoint",
    "load_toml",
    "main",
    "parse_config",
    "run",
]
