"""The job's runs: read -> evaluate -> write, and compare's read -> compare (N models) -> write.

Bad input leaves the output as it was: the figures are computed (and cached) before anything
is written. The manifest is written last; its presence marks a complete result.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Sequence

from pyspark.sql import functions as F

from ndcg_spark import _inputs
from ndcg_spark._report import ndcg_histogram, render, render_comparison
from ndcg_spark.compare import compare_models
from ndcg_spark.errors import INPUT_ERROR_TAG, ConfigError, InputDataError, NdcgError
from ndcg_spark.evaluation import evaluate
from ndcg_spark.job import storage
from ndcg_spark.job.config import JobConfig
from ndcg_spark.options import EvaluationOptions, k_label
from ndcg_spark.validation import validate


def main(spark, config: JobConfig) -> Dict[str, Any]:
    """Read both tables, evaluate, write ``per_user/``, ``summary/`` (and ``rejected/``,
    ``report.html``), then the manifest (``summary.json``, or
    ``_manifests/<key>=<value>/summary.json`` for a partitioned run). Returns the manifest."""
    started = time.time()
    # Let adaptive execution coalesce the partitions of the cached per-user frame, or a small
    # input is written as spark.sql.shuffle.partitions tiny files.
    spark.conf.set("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
    check_connect(spark, config)
    storage.check_output(config.output)
    recs = storage.read_input(spark, config, "recommendations")
    rel = storage.read_input(spark, config, "relevance")
    attributes = None
    if config.user_attributes:
        attributes = storage.read_input(spark, config, "user_attributes")
    # One row per recommendation (ALS's 'array' layout exploded), so the counts and checks see rows.
    recs, opts = _inputs.as_rows(recs, config.options)
    # The rows read are counted on the evaluation's own pass over each table, not by a pass of their own.
    recs, recs_read = _inputs.counted(recs)
    rel, rel_read = _inputs.counted(rel)
    result = evaluate(recs, rel, opts, user_attributes=attributes).persist()
    # The summary is a handful of rows: aggregated once (cached), then reported and written.
    summary = result.summary.persist()
    part = config.partition_spec
    try:
        explain_input_errors(result.scored.count, [recs], rel, opts)
        read = {"recommendations": recs_read.rows(), "relevance": rel_read.rows()}
        for table, n in read.items():
            if n == 0:
                raise InputDataError(f"{table} table is empty")
        metrics = [row.asDict() for row in summary.collect()]
        storage.check_partition_column(part, result.per_user, summary, *(result.rejected or {}).values())
        storage.write_table(result.per_user, config.output, "per_user", part)
        storage.write_table(summary, config.output, "summary", part)
        sums = result.row_accounting()
        rejected = storage.write_rejected(spark, result.rejected, config.output, part)
        if config.report:
            bins = [r.asDict() for r in ndcg_histogram(result.per_user, opts.group_by).collect()]
            notes = {"recommendations": config.recommendations, "relevance": config.relevance, "gain": opts.gain}
            if part:
                notes["partition"] = storage.partition_directory(part)
            storage.write_text(
                spark,
                storage.manifest_dir(config.output, part),
                "report.html",
                render(metrics, bins, opts.group_by, notes=notes),
            )
    finally:
        result.unpersist()
        summary.unpersist()
    manifest = {
        "metrics": metrics,
        "rows": account_rows(read, rejected, sums),
        "quality_gates": quality_gates(config, metrics),
        "partition": dict([part]) if part else None,
        "settings": config.to_dict(),
        "input_rows": read,
        "spark_version": spark.version,
        "duration_seconds": round(time.time() - started, 3),
    }
    storage.write_json(spark, storage.manifest_dir(config.output, part), "summary.json", manifest)
    return manifest


def compare_main(spark, config: JobConfig) -> Dict[str, Any]:
    """``ndcg-spark compare``: paired per-user NDCG of two or more models; writes ``per_user/``
    (the pairs), ``comparison/``, ``report.html`` and, last, ``comparison.json``."""
    started = time.time()
    check_connect(spark, config)
    storage.check_output(config.output)
    rel = storage.read_input(spark, config, "relevance")
    models = read_models(spark, config)
    attributes = None
    if config.user_attributes:
        attributes = storage.read_input(spark, config, "user_attributes")
    read: Dict[str, Dict[str, int]] = {}
    for name in models:
        models[name], opts = _inputs.as_rows(models[name], config.options)
        first = next(iter(read.values()), None)
        read[name] = count_rows(
            models[name], rel, opts, first and first["relevance"], f"model {name!r} recommendations"
        )
    baseline = config.baseline_model if config.model_col else config.recommendations
    result = compare_models(
        models,
        rel,
        opts,
        baseline=baseline,
        pairs=config.pairs,
        correction=config.correction,
        user_attributes=attributes,
    ).persist()
    part = config.partition_spec
    try:
        explain_input_errors(lambda: [df.count() for df in result.scored.values()], list(models.values()), rel, opts)
        storage.check_partition_column(part, result.per_user, result.summary)
        storage.write_table(result.per_user, config.output, "per_user", part)
        rows = result.report()
    finally:
        result.unpersist()
    if rows:
        storage.write_table(spark.createDataFrame(rows), config.output, "comparison", part)
    if config.report:
        notes = {"relevance": config.relevance, "gain": opts.gain, "correction": config.correction}
        if part:
            notes["partition"] = storage.partition_directory(part)
        page = render_comparison(rows, opts.group_by, notes=notes)
        storage.write_text(spark, storage.manifest_dir(config.output, part), "report.html", page)
    manifest = {
        "comparison": rows,
        "settings": config.to_dict(),
        "input_rows": read,
        "spark_version": spark.version,
        "duration_seconds": round(time.time() - started, 3),
    }
    storage.write_json(spark, storage.manifest_dir(config.output, part), "comparison.json", manifest)
    return manifest


def read_models(spark, config: JobConfig) -> Dict[str, Any]:
    """{model name: recommendations}: the baseline table and each candidate table (named by
    their path or table name), or the named values of one table's model column."""
    recs = storage.read_input(spark, config, "recommendations")
    if not config.model_col:
        models = {config.recommendations: recs}
        for path in config.candidates:
            if path in models:
                raise ConfigError(f"model {path!r} is given twice")
            models[path] = storage.read_input(spark, config, "recommendations", source=path, label="candidate")
        return models
    if config.model_col not in recs.columns:
        raise InputDataError(
            f"recommendations table has no column {config.model_col!r} (it has: {', '.join(recs.columns)})"
        )
    model = F.col(config.model_col).cast("string")
    named = [n for n in (config.baseline_model, *config.candidate_models) if n]
    if not config.candidate_models:
        # Every value of the column is a model: a handful of names, collected once.
        named += sorted(
            {r[0] for r in recs.select(model).distinct().collect()} - set(named), key=lambda v: (v is None, v)
        )
        if named and named[-1] is None:
            raise InputDataError(
                f"recommendations column {config.model_col!r} is null in some rows: every row needs its model"
            )
    if len(set(named)) != len(named):
        raise ConfigError(f"a model is named twice: {', '.join(named)}")
    if len(named) < 2:
        raise ConfigError(f"compare needs at least two models, got {len(named)}: {', '.join(named) or 'none'}")
    return {name: recs.filter(model == name).drop(config.model_col) for name in named}


def check_connect(spark, config: JobConfig) -> None:
    """Over Spark Connect, refuse what the job could not do as documented (exit 2).

    The server resolves a relative path against its own working directory, and the client,
    which writes ``summary.json`` and ``report.html`` with its own file system (it has no
    Hadoop API), can reach only a local output: a relative path, or an output URI other than
    ``file:``, is refused.
    """
    if not storage.is_connect(spark):
        return
    paths = [(key, getattr(config, key)) for key in ("recommendations", "relevance", "user_attributes", "output")]
    paths += [("candidate", path) for path in config.candidates]
    for key, value in paths:
        if not value or (key != "output" and not storage.is_path(value)):
            continue
        if "://" not in value and not value.startswith("file:") and not os.path.isabs(value):
            raise ConfigError(
                f"{key} {value!r} is a relative path: over Spark Connect it would resolve on the server; "
                "give an absolute path or a URI"
            )
    scheme = config.output.split("://", 1)[0] if "://" in config.output else "file"
    if scheme != "file":
        raise ConfigError(
            f"output {config.output!r}: over Spark Connect the client writes summary.json and report.html with its "
            "own file system, which cannot reach a " + scheme + ":// URI; run the job with spark-submit "
            "(classic mode) or give a path the client and the server share"
        )


def count_rows(
    recommendations, relevance, opts: EvaluationOptions, relevance_rows: int = None, recommendations_name: str = None
) -> Dict[str, int]:
    """Each table's row count (``relevance_rows`` when counted already); an empty table raises
    (naming the recommendations ``recommendations_name`` when given).

    The schemas are checked first, so a missing column is named before any data is read.
    """
    _inputs.check_tables(recommendations, relevance, opts)
    rows = {
        "recommendations": recommendations.count(),
        "relevance": relevance_rows if relevance_rows is not None else relevance.count(),
    }
    for table, n in rows.items():
        if n == 0:
            name = recommendations_name if table == "recommendations" and recommendations_name else table
            raise InputDataError(f"{name} table is empty")
    return rows


def explain_input_errors(
    compute: Callable[[], Any], recommendations: Sequence[Any], relevance, opts: EvaluationOptions
) -> Any:
    """Run ``compute``; when a bad input row stops it, raise :func:`~ndcg_spark.validate`'s message.

    The evaluation's checks stop at the first bad row they meet and name it; only then is each
    table read again by ``validate``, which counts every problem and names up to five examples.
    So input that is fine is read once.
    """
    try:
        return compute()
    except NdcgError:
        raise
    except Exception as exc:
        if INPUT_ERROR_TAG in str(exc):
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


def quality_gates(config: JobConfig, metrics: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Each ``--fail-below`` gate held against every segment it selects, with the segment's
    mean and whether it passed.

    A gate without a filter holds every segment (a null segment value included); one with a
    filter (``model=v2``) the segments whose value, as text, is the one given. A gate that
    selects no segment, or a segment without users in the mean, does not pass: a typo in a
    filter must not let a run through.
    """
    group_by = config.options.group_by
    checked = []
    for where, k, threshold in config.gates:
        rows = [
            m for m in metrics if m["k"] == k and all(m[c] is not None and str(m[c]) == value for c, value in where)
        ]
        for m in rows:
            mean = m["mean_ndcg"]
            checked.append(
                {
                    "segment": {c: m[c] for c in group_by},
                    "k": k,
                    "threshold": threshold,
                    "users": m["users"],
                    "mean_ndcg": mean,
                    "passed": mean is not None and mean >= threshold,
                }
            )
        if not rows:
            checked.append(
                {
                    "segment": dict(where),
                    "k": k,
                    "threshold": threshold,
                    "users": None,
                    "mean_ndcg": None,
                    "passed": False,
                }
            )
    return checked


def gate_failure(failed: List[Dict[str, Any]]) -> str:
    """One line naming the first failed gate's segment, k, figure and threshold (and how many more)."""
    g = failed[0]
    segment = ", ".join(f"{c}={v}" for c, v in g["segment"].items())
    of = f" of {segment}" if segment else ""
    if g["mean_ndcg"] is not None:
        what = f"mean NDCG@{k_label(g['k'])}{of} = {g['mean_ndcg']:.6f} is below {g['threshold']}"
    elif g["users"] is None:
        what = f"no segment {segment} at NDCG@{k_label(g['k'])} to hold against {g['threshold']}"
    else:
        what = f"mean NDCG@{k_label(g['k'])}{of} has no users, below {g['threshold']}"
    more = f"; {len(failed) - 1} more gate(s) failed, see summary.json" if len(failed) > 1 else ""
    return f"quality gate failed: {what}{more} (outputs were written)"


def finished_record(command: str, config: JobConfig, manifest: Dict[str, Any], status: str) -> Dict[str, Any]:
    """The ``ndcg_spark.finished`` JSON line: the figures per segment and k (``"all"`` for the
    whole list), and without segments also ``users`` and ``mean_ndcg`` keyed by k."""
    group_by, part = config.options.group_by, config.partition_spec
    if command == "compare":
        fields = (
            "baseline_model",
            "candidate_model",
            "pairs",
            "mean_ndcg_baseline",
            "mean_ndcg_candidate",
            "mean_difference",
            "p_value",
            "p_value_adjusted",
        )
        rows = manifest["comparison"]
    else:
        fields = ("users", "mean_ndcg")
        rows = manifest["metrics"]
    figures = [
        {"segment": {c: r[c] for c in group_by}, "k": k_label(r["k"]), **{f: r.get(f) for f in fields}} for r in rows
    ]
    record = {"event": "ndcg_spark.finished", "command": command, "status": status, "output": config.output}
    record["partition"] = dict([part]) if part else None
    if command != "compare" and not group_by:
        record["users"] = rows[0]["users"] if rows else 0
        record["mean_ndcg"] = {k_label(r["k"]): r["mean_ndcg"] for r in rows}
    record["figures"] = figures
    record["input_rows"] = manifest["input_rows"]
    record["duration_seconds"] = manifest["duration_seconds"]
    return record
