"""The job's runs: read -> evaluate -> write, and compare's read -> compare (N models) -> write.

Every run goes through one sink (:mod:`ndcg_spark.job.sinks`): a directory or a family of
catalog tables. The sink checks that the run fits the output, holds the run's place (the output
or its partition), takes the named frames and files the run computes, and publishes them whole
with the run's result. Bad input stops the run before anything is published, so the previous
result stays as it was. The drop gate and the trend read earlier runs from the same sink.
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from pyspark.sql import functions as F
from pyspark.sql import types as T

from ndcg_spark.compare import compare_models
from ndcg_spark.errors import ConfigError, InputDataError, NdcgError, RowCheckFailed, input_errors
from ndcg_spark.evaluation import evaluate
from ndcg_spark.job import history, interrupts, progress, publish, regression, storage, tracking, verdict
from ndcg_spark.job.checks import check
from ndcg_spark.job.config import CompareConfig, EvaluateConfig
from ndcg_spark.job.gates import margins_by_k
from ndcg_spark.job.result import Published, RunResult
from ndcg_spark.job.sinks import Runs, Sink, Stage, sink_for
from ndcg_spark.options import EvaluationOptions
from ndcg_spark.report import ndcg_histogram, render, render_comparison
from ndcg_spark.validation import validate


def place_of(spark, config) -> Sink:
    """The run's output as one value, made once (:func:`~ndcg_spark.job.sinks.sink_for`): a
    directory (its one spelling, absolute and qualified, and its file system) or a family of
    catalog tables, with the partition the run owns. Everything the run writes, reads back and
    records goes through it."""
    return sink_for(spark, config)


def main(spark, config: EvaluateConfig, place: Optional[Sink] = None) -> RunResult:
    """Read both tables, evaluate, hold the gates (``--fail-below``, and ``--fail-if-drop``
    against the previous complete run), and publish ``per_user/``, ``summary/`` (and
    ``rejected/``, ``report.html``) with the manifest (``summary.json``, or
    ``_manifests/<key>=<value>/summary.json`` for a partitioned run) in ``place`` (by default
    :func:`place_of` the config). Returns the run's result; a failed gate is recorded there, not
    raised (the command line exits 4), and MLflow logging is left to the caller (:func:`track`),
    after publishing."""
    with sort_based_aggregation(spark):
        return _run(spark, config, place or place_of(spark, config), _evaluate)


@contextlib.contextmanager
def sort_based_aggregation(spark):
    """The lists collected by sort-based aggregation for the run, the session's setting restored after.

    Spark's hash aggregation of ``collect_list`` falls back to sorting past 128 users a task,
    spilling on both sides of the shuffle, and the join then sorts the judged lists once more;
    sorted first, they are aggregated in the join's order: at 400,000 users the run spills
    1,092 MB where it spilled 1,731 MB (P: 1,240 MB) for the same task CPU (docs/benchmarks.md).
    """
    key = "spark.sql.execution.useObjectHashAggregateExec"
    before = spark.conf.get(key, None)
    spark.conf.set(key, "false")
    try:
        yield
    finally:
        spark.conf.unset(key) if before is None else spark.conf.set(key, before)


def compare_main(spark, config: CompareConfig, place: Optional[Sink] = None) -> RunResult:
    """``ndcg-spark compare``: paired per-user NDCG of two or more models; publishes
    ``per_user/`` (the pairs), ``comparison/``, ``report.html`` and ``comparison.json``."""
    return _run(spark, config, place or place_of(spark, config), _compare)


def _run(spark, config, sink: Sink, compute: Callable) -> RunResult:
    """Check, lock, recover, compute into the sink's stage, publish: the protocol around each command."""
    started = time.time()
    if config.mlflow:
        # A store MLflow cannot open is a config error before anything is read, not after publishing.
        tracking.mlflow_client(config.mlflow.tracking_uri)
    sink.check(spark, config)
    interrupts.check()
    run_id = publish.new_run_id()
    try:
        with sink.locked(run_id, config.output) as held:
            sink.recover()
            stage = sink.stage(spark, run_id)

            def guard() -> None:
                interrupts.check()
                held.ensure()

            try:
                computed = compute(spark, config, stage, sink.runs())
                published = Published(run_id, sink.root, held.broke, **stage.describe())
                result = computed.finished(published, round(time.time() - started, 3))
                progress.phase("publishing")
                stage.publish(result.to_json(), guard)
            finally:
                stage.discard()
    finally:
        sink.tidy()
    return result


def _evaluate(spark, config: EvaluateConfig, stage: Stage, runs: Runs) -> RunResult:
    # Let adaptive execution coalesce the partitions of the cached per-user frame, or a small
    # input is written as spark.sql.shuffle.partitions tiny files.
    spark.conf.set("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
    progress.phase("reading the inputs")
    recs = storage.read_input(spark, config, "recommendations")
    rel = storage.read_input(spark, config, "relevance")
    attributes = None
    if config.inputs.user_attributes:
        attributes = storage.read_input(spark, config, "user_attributes")
    opts = config.options
    # The rows read are counted on the evaluation's own pass over each table, not by a pass of
    # their own (ALS's 'array' layout as the rows it holds): evaluation.input_rows().
    evaluation = evaluate(recs, rel, opts, user_attributes=attributes).persist()
    # Each output's plan built once (the cached frame is the one computation they share).
    per_user, summary = evaluation.per_user, evaluation.summary
    part = config.output.partition
    try:
        check_partition_column(part, per_user, summary, *(evaluation.rejected or {}).values())
        # The first action computes the cached per-user figures, checks and counts on the way.
        write_per_user = functools.partial(stage.write, "per_user", per_user)
        progress.phase("evaluating and writing per_user")
        explain_input_errors(write_per_user, [recs], rel, opts)
        read = evaluation.input_rows()
        for table, n in read.items():
            if n == 0:
                raise InputDataError(f"{table} table is empty")
        # The summary is a handful of rows (one file, in order): aggregated once as it is written,
        # and the figures reported are read back from the table written.
        progress.phase("writing summary")
        stage.write("summary", summary)
        metrics = [row.asDict() for row in stage.read("summary").collect()]
        sums = evaluation.row_accounting()
        rejected = write_rejected(evaluation.rejected, stage)
        drop = None
        if config.drop:
            progress.phase("comparing with the previous run (--fail-if-drop)")
            # Tonight's per-user figures are cached: the pairing with the previous run reads them again.
            drop = regression.regression_gate(
                spark, runs, part.value, per_user, config.drop.gates, opts.group_by,
                opts.user_col, key=part.key, point_estimate=config.drop.on_estimate,
                passed_only=config.drop.baseline == "last_passed",
            )  # fmt: skip
        result = _result(
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
            bins = [r.asDict() for r in ndcg_histogram(per_user, opts.group_by).collect()]
            trend, key = trend_of(config, metrics, runs), part.key if part else "run_date"
            page = render(
                metrics, bins, opts.group_by, notes=report_notes(config, opts), options=opts, trend=trend,
                trend_key=key, verdict=verdict.gate_lines(result), limits=verdict.limits(result),
            )  # fmt: skip
            stage.file("report.html", page)
    finally:
        evaluation.unpersist()
    return result


def _compare(spark, config: CompareConfig, stage: Stage, runs: Runs) -> RunResult:
    progress.phase("reading the inputs")
    rel = storage.read_input(spark, config, "relevance")
    attributes = None
    if config.inputs.user_attributes:
        attributes = storage.read_input(spark, config, "user_attributes")
    recs = storage.read_input(spark, config, "recommendations")
    if config.model_col:
        models = recs
        if config.candidate_models:
            named = [config.baseline_model, *config.candidate_models]
            models = recs.filter(F.col(config.model_col).cast("string").isin(*[n for n in named if n]))
    else:
        models = {config.inputs.recommendations: recs}
        for path in config.candidates:
            if path in models:
                raise ConfigError(f"model {path!r} is given twice")
            models[path] = storage.read_input(spark, config, "recommendations", source=path, label="candidate")
    result = compare_models(
        models,
        rel,
        config.options,
        model_col=config.model_col,
        baseline=config.baseline_model if config.model_col else config.inputs.recommendations,
        pairs=config.pairs,
        correction=config.correction,
        user_attributes=attributes,
    ).persist()
    opts, part = result.options, config.output.partition
    try:
        names = list(result.evaluations)
        recommendations = [models] if config.model_col else list(models.values())
        progress.phase("comparing the models")
        explain_input_errors(
            lambda: [r.every_user().count() for r in result.evaluations.values()], recommendations, rel, opts
        )
        missing = [n for n in config.candidate_models if n not in names]
        read = result.input_rows()
        empty = missing + [n for n in names if read[n]["recommendations"] == 0]
        if empty:
            raise InputDataError(f"model {empty[0]!r} recommendations table is empty")
        if read[names[0]]["relevance"] == 0:
            raise InputDataError("relevance table is empty")
        check_partition_column(part, result.per_user, result.summary)
        progress.phase("writing per_user")
        stage.write("per_user", result.per_user)
        rows, typed = result.report(), result.summary.schema
    finally:
        result.unpersist()
    if rows:
        stage.write("comparison", comparison_table(spark, rows, typed))
    outcome = _result(
        spark,
        config,
        read,
        comparison=tuple(rows),
        worse=tuple(check(config.worse_gates, rows, opts.group_by)),
    )
    if config.output.report:
        notes = {**report_notes(config, opts), "correction": config.correction}
        margins, lines = margins_by_k(config.worse_gates), verdict.gate_lines(outcome)
        stage.file("report.html", render_comparison(rows, opts.group_by, notes=notes, margins=margins, verdict=lines))
    return outcome


def _result(spark, config, read: Dict[str, Any], **computed: Any) -> RunResult:
    """The run's result before publishing: the config as run, the rows read, and what it computed."""
    part = config.output.partition
    partition = {part.key: part.value} if part else None
    return RunResult(config.command, config.to_dict(), read, spark.version, partition, **computed)


def comparison_table(spark, rows: List[Dict[str, Any]], summary: T.StructType):
    """compare's table from its rows, with a declared schema: the summary's columns as Spark
    typed them, the model names as strings, the t-test's figures as doubles. Never inferred from
    the values: a column all null (the t statistic of two identical models) has none to infer."""
    typed = {f.name: f.dataType for f in summary.fields}
    columns = list(rows[0])
    schema = T.StructType(
        [
            T.StructField(c, typed.get(c) or (T.StringType() if c.endswith("_model") else T.DoubleType()))
            for c in columns
        ]
    )
    return spark.createDataFrame([tuple(r[c] for c in columns) for r in rows], schema)


def trend_of(config: EvaluateConfig, metrics: List[Dict[str, Any]], runs: Runs) -> Optional[List[Dict[str, Any]]]:
    """The report's trend rows: tonight's figures and those of the earlier complete runs (read
    from the sink), ``trend_runs`` runs in all; None for a run without a partition."""
    part, last = config.output.partition, config.trend_runs
    if part is None or last == 0:
        return None
    earlier = runs.history(part.key, last=last - 1, before=part.value)
    return history.trend_rows(earlier, (part.value, metrics), part.key, last, config.options.group_by)


def track(config, result: RunResult, place: Sink, gate_failed: Optional[bool]) -> str:
    """Log a published run to MLflow (``config.mlflow``): the marker and the report as they were
    published, read back from the sink. Returns the MLflow run id."""
    texts = place.texts(result)
    return tracking.log_run(
        result, experiment=config.mlflow.experiment, tracking_uri=config.mlflow.tracking_uri, texts=texts,
        gate_failed=gate_failed,
    )  # fmt: skip


def report_notes(config, opts: EvaluationOptions) -> Dict[str, Any]:
    """The report page's line of settings: inputs, gain and the partition."""
    notes = {"recommendations": config.inputs.recommendations, "relevance": config.inputs.relevance, "gain": opts.gain}
    if config.command == "compare":
        notes.pop("recommendations")
    if config.output.partition:
        notes["partition"] = config.output.partition.directory
    return notes


def check_partition_column(partition, *frames) -> None:
    """The partition column must not be a column of what is written: its value would replace it."""
    if partition is None:
        return
    for df in frames:
        if partition.key in df.columns:
            raise ConfigError(f"partition column {partition.key!r} is also a column of the output; choose another name")


def write_rejected(rejected, stage: Stage) -> Dict[str, Dict[str, int]]:
    """Write quarantined rows as ``rejected/<table>`` and count them per reason, as written."""
    counts: Dict[str, Dict[str, int]] = {"recommendations": {}, "relevance": {}}
    for table, frame in (rejected or {}).items():
        stage.write(f"rejected/{table}", frame)
        for row in stage.read(f"rejected/{table}").groupBy("reason").count().collect():
            counts[table][row["reason"]] = row["count"]
    return counts


def explain_input_errors(
    compute: Callable[[], Any], recommendations: Sequence[Any], relevance, opts: EvaluationOptions
) -> Any:
    """Run ``compute``; when a bad input row stops it, raise :func:`~ndcg_spark.validate`'s message.

    The evaluation's checks stop at the first bad row they meet and name it; only then is each
    table read again by ``validate``, which counts every problem and names up to five examples.
    So input that is fine is read once.
    """
    try:
        with input_errors():
            return compute()
    except RowCheckFailed:
        for recs in recommendations:
            validate(recs, relevance, opts)
        raise


def account_rows(read: Dict[str, int], rejected: Dict[str, Dict[str, int]], sums: Dict[str, int]) -> Dict[str, Any]:
    """Every input row as used or set aside for a reason; raises if they do not add up.

    Each reason is counted from its own rows, so rows lost inside the evaluation show here.
    """
    tables = {
        "recommendations": {
            "read": read["recommendations"],
            "used": sums["recommendations_used"],
            "set_aside": {
                **{f"invalid: {k}": v for k, v in sorted(rejected["recommendations"].items())},
                "beyond the largest k": sums["recommendations_beyond_k"],
                "repeated item (slot kept, no gain)": sums["recommendations_repeated"],
                "users excluded by a policy": sums["recommendations_excluded"],
            },
        },
        "relevance": {
            "read": read["relevance"],
            "used": sums["relevance_used"],
            "set_aside": {
                **{f"invalid: {k}": v for k, v in sorted(rejected["relevance"].items())},
                "duplicates collapsed (max)": sums["relevance_collapsed"],
                "users excluded by a policy": sums["relevance_excluded"],
            },
        },
    }
    for table, t in tables.items():
        if t["read"] != t["used"] + sum(t["set_aside"].values()):
            raise NdcgError(
                f"row accounting of {table} does not add up: read {t['read']} != used {t['used']} + "
                f"set aside {sum(t['set_aside'].values())} {t['set_aside']}"
            )
    return tables
