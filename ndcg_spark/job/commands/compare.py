"""``ndcg-spark compare``: paired per-user NDCG of two or more models (through
``compare_models``), with the non-inferiority gate; publishes ``per_user/`` (the pairs),
``comparison/``, ``report.html`` and ``comparison.json`` through the run protocol."""

from __future__ import annotations

from typing import Any, Dict, List

from pyspark.sql import functions as F
from pyspark.sql import types as T

from ndcg_spark.compare import compare_models
from ndcg_spark.errors import EMPTY_TABLE, ConfigError, InputDataError
from ndcg_spark.job import progress
from ndcg_spark.job.commands import protocol
from ndcg_spark.job.commands.evaluate import report_notes
from ndcg_spark.job.commands.input_tables import check_partition_column, explain_input_errors, read_input
from ndcg_spark.job.config.gate_specs import margins_by_k
from ndcg_spark.job.config.parsing import CompareConfig
from ndcg_spark.job.gates import wording
from ndcg_spark.job.gates.holding import check
from ndcg_spark.job.outputs.contract import Runs, Stage
from ndcg_spark.job.result import RunResult
from ndcg_spark.report import render_comparison


def main(spark, config: CompareConfig) -> RunResult:
    """``ndcg-spark compare``: paired per-user NDCG of two or more models; publishes
    ``per_user/`` (the pairs), ``comparison/``, ``report.html`` and ``comparison.json``."""
    return command(spark, config).result


def command(spark, config: CompareConfig) -> protocol.Ran:
    """:func:`main`, with what MLflow logs read back from the output (:class:`~.protocol.Ran`)."""
    return protocol.run(spark, config, _compare)


def _compare(spark, config: CompareConfig, stage: Stage, runs: Runs) -> RunResult:
    progress.phase("reading the inputs")
    rel = read_input(spark, config, "relevance")
    attributes = None
    if config.inputs.user_attributes:
        attributes = read_input(spark, config, "user_attributes")
    recs = read_input(spark, config, "recommendations")
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
            models[path] = read_input(spark, config, "recommendations", source=path, label="candidate")
    # The beyond-accuracy inputs, those given, read as evaluate reads them and shared by every model.
    beyond = {
        role: read_input(spark, config, role)
        for role in ("interactions", "items", "baseline_recommendations")
        if getattr(config.inputs, role)
    }
    result = compare_models(
        models,
        rel,
        config.options,
        model_col=config.model_col,
        baseline=config.baseline_model if config.model_col else config.inputs.recommendations,
        pairs=config.pairs,
        correction=config.correction,
        user_attributes=attributes,
        **beyond,
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
            raise InputDataError(
                f"model {empty[0]!r} recommendations table is empty",
                condition=EMPTY_TABLE,
                parameters={"table": "recommendations", "model": empty[0]},
            )
        if read[names[0]]["relevance"] == 0:
            raise InputDataError("relevance table is empty", condition=EMPTY_TABLE, parameters={"table": "relevance"})
        check_partition_column(part, result.per_user, result.summary)
        progress.phase("writing per_user")
        stage.write("per_user", result.per_user)
        rows, typed = result.report(), result.summary.schema
    finally:
        result.unpersist()
    if rows:
        stage.write("comparison", comparison_table(spark, rows, typed))
    outcome = protocol.result_of(
        spark,
        config,
        read,
        comparison=tuple(rows),
        worse=tuple(check(config.worse_gates, rows, opts.group_by)),
    )
    if config.output.report:
        notes = {**report_notes(config, opts), "correction": config.correction}
        margins, lines = margins_by_k(config.worse_gates), wording.gate_lines(outcome)
        stage.file("report.html", render_comparison(rows, opts.group_by, notes=notes, margins=margins, verdict=lines))
    return outcome


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
