"""The evaluation job: config (TOML + flags) -> read -> evaluate -> write.

:mod:`~ndcg_spark.job.config` reads the configuration, :mod:`~ndcg_spark.job.storage` reads
and writes, :mod:`~ndcg_spark.job.pipeline` wires a run, :mod:`~ndcg_spark.job.console` prints,
and :mod:`~ndcg_spark.job.cli` is the entry point.
"""

from ndcg_spark.job.cli import entrypoint, run
from ndcg_spark.job.config import JobConfig, load_toml, parse_config
from ndcg_spark.job.pipeline import compare_main, main

__all__ = ["JobConfig", "compare_main", "entrypoint", "load_toml", "main", "parse_config", "run"]
