"""``ndcg-spark``: read both tables, evaluate, hold the gates (the floors, and the drop gate
against the previous run), and publish the per-user and summary tables, the set-aside rows, the
report and the manifest through the run protocol (:mod:`.protocol`)."""

from __future__ import annotations

import functools
from typing import Any, Dict, List, Optional

from pyspark.sql import DataFrame

from ndcg_spark.errors import EMPTY_TABLE, InputDataError
from ndcg_spark.evaluation import evaluate
from ndcg_spark.job import progress
from ndcg_spark.job.commands import history, protocol
from ndcg_spark.job.commands.input_tables import (
    account_rows,
    check_partition_column,
    explain_input_errors,
    read_input,
    write_rejected,
)
from ndcg_spark.job.config.gate_specs import Gate
from ndcg_spark.job.config.parsing import EvaluateConfig
from ndcg_spark.job.config.targets import RUN_DATE
from ndcg_spark.job.gates import wording
from ndcg_spark.job.gates.holding import check
from ndcg_spark.job.gates.regression import regression_gate
from ndcg_spark.job.outputs.contract import Runs, Stage
from ndcg_spark.job.result import DropOutcome, RunResult
from ndcg_spark.options import EvaluationOptions
from ndcg_spark.report import ndcg_histogram, render


def main(spark, config: EvaluateConfig) -> RunResult:
    """Read both tables, evaluate, hold the gates (``--fail-below``, and ``--fail-if-drop``
    against the previous complete run), and publish ``per_user/``, ``summary/`` (and
    ``rejected/``, ``report.html``) with the manifest (``summary.json``, or
    ``_manifests/<key>=<value>/summary.json`` for a partitioned run), or the same rows into a
    family of catalog tables. Returns the run's result; a failed gate is recorded there, not
    raised (the command line exits 4), and MLflow logging is left to the caller, after publishing."""
    return command(spark, config).result


def command(spark, config: EvaluateConfig) -> protocol.Ran:
    """:func:`main`, with what MLflow logs read back from the output (:class:`~.protocol.Ran`)."""
    return protocol.run(spark, config, _evaluate)


def _evaluate(spark, config: EvaluateConfig, stage: Stage, runs: Runs) -> RunResult:
    # Let adaptive execution coalesce the partitions of the cached per-user frame, or a small
    # input is written as spark.sql.shuffle.partitions tiny files.
    spark.conf.set("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
    progress.phase("reading the inputs")
    recs = read_input(spark, config, "recommendations")
    rel = read_input(spark, config, "relevance")
    attributes = None
    if config.inputs.user_attributes:
        attributes = read_input(spark, config, "user_attributes")
    opts = config.options
    # The beyond-accuracy inputs, those given.
    beyond = {
        role: read_input(spark, config, role)
        for role in ("interactions", "items", "baseline_recommendations")
        if getattr(config.inputs, role)
    }
    # The rows read are counted on the evaluation's own pass over each table, not by a pass of
    # their own (ALS's 'array' layout as the rows it holds): evaluation.input_rows().
    evaluation = evaluate(recs, rel, opts, user_attributes=attributes, **beyond)
    # Each output written once; the summary's rows and the row accounting's sums are observed on
    # the writes. The per-user figures are cached only when they are read again after their
    # write (the drop gate's pairing, or a histogram the write could not count): else the
    # per-user write is the run's one pass (EvaluationResult.written_once).
    outputs = evaluation.written_once(again=bool(config.drop), histogram=config.output.report)
    per_user = outputs.per_user
    part = config.output.partition
    try:
        if part is not None:
            check_partition_column(part, per_user, evaluation.summary, *(evaluation.rejected or {}).values())
        # The first action computes the cached per-user figures, checks and counts on the way.
        write_per_user = functools.partial(stage.write, "per_user", per_user)
        progress.phase("evaluating and writing per_user")
        explain_input_errors(write_per_user, [recs], rel, opts)
        read = evaluation.input_rows()
        for table, n in read.items():
            if n == 0 and table in ("recommendations", "relevance"):  # a beyond-accuracy table may be empty
                raise InputDataError(f"{table} table is empty", condition=EMPTY_TABLE, parameters={"table": table})
        # The summary is a handful of rows (one file, in order): aggregated once as it is written,
        # and the figures reported are the rows that write observed.
        progress.phase("writing summary")
        stage.write("summary", outputs.summary())
        metrics = outputs.summary_rows()
        sums = outputs.row_accounting()
        rejected = write_rejected(evaluation.rejected, stage)
        drop = None
        if config.drop:
            progress.phase("comparing with the previous run (--fail-if-drop)")
            # Tonight's per-user figures are cached: the pairing with the previous run reads them again.
            drop = drop_gate(
                spark, runs, part.value, per_user, config.drop.gates, opts.group_by,
                opts.user_col, key=part.key, point_estimate=config.drop.on_estimate,
                passed_only=config.drop.baseline == "last_passed",
            )  # fmt: skip
        result = protocol.result_of(
            spark,
            config,
            read,
            metrics=tuple(metrics),
            rows=account_rows(read, rejected, sums),
            floors=tuple(check(config.gates, metrics, opts.group_by)),
            drop=drop,
        )
        if config.output.report:
            progress.phase("writing report.html")
            bins = outputs.histogram()
            if bins is None:  # not counted on the per-user write: counted from the cached figures
                bins = [r.asDict() for r in ndcg_histogram(per_user, opts.group_by).collect()]
            trend, key = trend_of(config, metrics, runs), part.key if part else RUN_DATE
            # The exposure curve: at most 100 bins of popularity rank, counted in Spark.
            curve = evaluation.exposure_curve()
            exposure = [r.asDict() for r in curve.collect()] if curve is not None else None
            page = render(
                metrics, bins, opts.group_by, notes=report_notes(config, opts), options=opts, trend=trend,
                trend_key=key, verdict=wording.gate_lines(result), limits=wording.limits(result),
                exposure=exposure, exposure_k=opts.largest_k,
            )  # fmt: skip
            stage.file("report.html", page)
    finally:
        outputs.unpersist()
    return result


def drop_gate(
    spark, runs: Runs, current_value: str, current_per_user: DataFrame, gates: List[Gate], group_by: List[str],
    user_col: str, *, key: str = RUN_DATE, point_estimate: bool = False, passed_only: bool = False,
) -> DropOutcome:  # fmt: skip
    """``--fail-if-drop``: the most recent earlier run of ``runs`` (whose tables are there; with
    ``passed_only`` whose gates all passed), its per-user frame handed to the regression gate."""
    previous, skipped = runs.previous(current_value, key, passed_only=passed_only)
    earlier = runs.per_user(spark, previous, key) if previous is not None else None
    which = "passing run" if passed_only else "complete run"
    return regression_gate(
        previous, earlier, current_value, current_per_user, gates, group_by, user_col, key=key,
        point_estimate=point_estimate, which=which, skipped=skipped, shown=runs.shown,
    )  # fmt: skip


def trend_of(config: EvaluateConfig, metrics: List[Dict[str, Any]], runs: Runs) -> Optional[List[Dict[str, Any]]]:
    """The report's trend rows: tonight's figures and those of the earlier complete runs (read
    from the sink), ``trend_runs`` runs in all; None for a run without a partition."""
    part, last = config.output.partition, config.trend_runs
    if part is None or last == 0:
        return None
    earlier = runs.history(part.key, last=last - 1, before=part.value)
    return history.trend_rows(earlier, (part.value, metrics), part.key, last, config.options.group_by)


def report_notes(config, opts: EvaluationOptions) -> Dict[str, Any]:
    """The report page's line of settings: inputs, gain and the partition."""
    notes = {"recommendations": config.inputs.recommendations, "relevance": config.inputs.relevance, "gain": opts.gain}
    if config.command == "compare":
        notes.pop("recommendations")
    if config.output.partition:
        notes["partition"] = config.output.partition.directory
    return notes
