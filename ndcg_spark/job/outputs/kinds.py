"""One place chooses the kind of an output: the first of :data:`KINDS` that serves it.

A kind of output is a module (or any object) with the functions of
:class:`~ndcg_spark.job.outputs.contract.Kind`: whether it serves an output, its sink, the runs
``history`` reads, and what it refuses before Spark starts. Adding one is a new module under
``outputs/`` and one entry here.
"""

from __future__ import annotations

from typing import Optional

from ndcg_spark.job.outputs.catalog import tables
from ndcg_spark.job.outputs.contract import Kind, Runs, Sink
from ndcg_spark.job.outputs.directory import folder
from ndcg_spark.job.outputs.files import check_connect

#: The kinds of output, asked in order: a family of catalog tables (``--output-table``), then an
#: output directory (any ``--output``).
KINDS = (tables, folder)


def kind_of(path: Optional[str], table: Optional[str]) -> Kind:
    """The kind of the output given as ``path`` (``--output``) or ``table`` (``--output-table``)."""
    return next(kind for kind in KINDS if kind.serves(path, table))


def sink_for(spark, config) -> Sink:
    """The run's sink, made once from ``config.output`` (refused first over Spark Connect when the
    client could not reach it)."""
    check_connect(spark, config)
    return kind_of(config.output.path, config.output.table).sink(spark, config)


def runs_for(spark, config) -> Runs:
    """The runs ``ndcg-spark history`` shows (``config``: a :class:`~ndcg_spark.job.config.parsing.HistoryConfig`)."""
    return kind_of(config.output, config.output_table).runs(spark, config.output, config.output_table)


def reads_without_spark(config) -> bool:
    """Whether ``history`` can read the runs of ``config``'s output without Spark."""
    return kind_of(config.output, config.output_table).without_spark(config.output, config.output_table)


def refuse_early(config) -> None:
    """Before Spark starts: what the output's kind refuses (a local directory's layout, a live lock)."""
    kind_of(config.output.path, config.output.table).refuse_early(config)
