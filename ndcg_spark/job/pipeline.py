"""The job's runs: read -> evaluate -> write, and compare's read -> compare (N models) -> write.

Every run goes through :mod:`ndcg_spark.job.publish`: the output's layout is checked, the run's
place (the output or its partition) locked, the result computed and written to a staging
folder, then published with its marker last. Bad input stops the run before anything is
published, so the previous result stays as it was.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Sequence

from pyspark.sql import functions as F

from ndcg_spark import _inputs
from ndcg_spark._report import ndcg_histogram, render, render_comparison
from ndcg_spark.compare import compare_models
from ndcg_spark.errors import ConfigError, InputDataError, NdcgError, RowCheckFailed, as_error
from ndcg_spark.evaluation import evaluate
from ndcg_spark.job import publish, storage
from ndcg_spark.job.config import CompareConfig, EvaluateConfig
from ndcg_spark.options import EvaluationOptions, k_label
from ndcg_spark.validation import validate


def main(spark, config: EvaluateConfig) -> Dict[str, Any]:
    """Read both tables, evaluate, and publish ``per_user/``, ``summary/`` (and ``rejected/``,
    ``report.html``) with the manifest (``summary.json``, or
    ``_manifests/<key>=<value>/summary.json`` for a partitioned run). Returns the manifest."""
    return _run(spark, config, _evaluate)


def compare_main(spark, config: CompareConfig) -> Dict[str, Any]:
    """``ndcg-spark compare``: paired per-user NDCG of two or more models; publishes
    ``per_user/`` (the pairs), ``comparison/``, ``report.html`` and ``comparison.json``."""
    return _run(spark, config, _compare)


def _run(spark, config, compute: Callable) -> Dict[str, Any]:
    """Check, lock, recover, compute into staging, publish: the protocol around each command."""
    started = time.time()
    check_connect(spark, config)
    place = publish.Place(storage.Files(spark, config.output.path), config.command, config.output.partition)
    publish.check_layout(place)
    run_id, made_output = publish.new_run_id(), not place.files.exists(place.files.root)
    try:
        with publish.locked(place, run_id, config.output.break_lock) as broken:
            publish.recover(place)
            stage = publish.Staging(place, run_id)
            try:
                manifest = compute(spark, config, stage)
                manifest["run"] = {"id": run_id, "broke_lock_of": broken, **stage.describe()}
                manifest["duration_seconds"] = round(time.time() - started, 3)
                stage.publish(manifest)
            finally:
                stage.discard()
    finally:
        publish.tidy(place, made_output)
    return manifest


def _evaluate(spark, config: EvaluateConfig, stage: publish.Staging) -> Dict[str, Any]:
    # Let adaptive execution coalesce the partitions of the cached per-user frame, or a small
    # input is written as spark.sql.shuffle.partitions tiny files.
    spark.conf.set("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
    recs = storage.read_input(spark, config, "recommendations")
    rel = storage.read_input(spark, config, "relevance")
    attributes = None
    if config.inputs.user_attributes:
        attributes = storage.read_input(spark, config, "user_attributes")
    # One row per recommendation (ALS's 'array' layout exploded), so the counts and checks see rows.
    recs, opts = _inputs.as_rows(recs, config.options)
    # The rows read are counted on the evaluation's own pass over each table, not by a pass of their own.
    recs, recs_read = _inputs.counted(recs)
    rel, rel_read = _inputs.counted(rel)
    result = evaluate(recs, rel, opts, user_attributes=attributes).persist()
    # The summary is a handful of rows: aggregated once (cached), then reported and written.
    summary = result.summary.persist()
    part = config.output.partition
    try:
        explain_input_errors(result.scored.count, [recs], rel, opts)
        read = {"recommendations": recs_read.rows(), "relevance": rel_read.rows()}
        for table, n in read.items():
            if n == 0:
                raise InputDataError(f"{table} table is empty")
        metrics = [row.asDict() for row in summary.collect()]
        check_partition_column(part, result.per_user, summary, *(result.rejected or {}).values())
        storage.write_table(result.per_user, stage.table("per_user"))
        storage.write_table(summary, stage.table("summary"))
        sums = result.row_accounting()
        rejected = write_rejected(spark, result.rejected, stage)
        if config.output.report:
            bins = [r.asDict() for r in ndcg_histogram(result.per_user, opts.group_by).collect()]
            stage.file(
                "report.html", render(metrics, bins, opts.group_by, notes=report_notes(config, opts), options=opts)
            )
    finally:
        result.unpersist()
        summary.unpersist()
    return {
        "metrics": metrics,
        "rows": account_rows(read, rejected, sums),
        "quality_gates": quality_gates(config, metrics),
        "partition": {part.key: part.value} if part else None,
        "settings": config.to_dict(),
        "input_rows": read,
        "spark_version": spark.version,
    }


def _compare(spark, config: CompareConfig, stage: publish.Staging) -> Dict[str, Any]:
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
        names = list(result.scored)
        recommendations = [models] if config.model_col else list(models.values())
        explain_input_errors(lambda: [df.count() for df in result.scored.values()], recommendations, rel, opts)
        missing = [n for n in config.candidate_models if n not in names]
        read = result.input_rows()
        empty = missing + [n for n in names if read[n]["recommendations"] == 0]
        if empty:
            raise InputDataError(f"model {empty[0]!r} recommendations table is empty")
        if read[names[0]]["relevance"] == 0:
            raise InputDataError("relevance table is empty")
        check_partition_column(part, result.per_user, result.summary)
        storage.write_table(result.per_user, stage.table("per_user"))
        rows = result.report()
    finally:
        result.unpersist()
    if rows:
        storage.write_table(spark.createDataFrame(rows), stage.table("comparison"))
    if config.output.report:
        notes = {**report_notes(config, opts), "correction": config.correction}
        stage.file("report.html", render_comparison(rows, opts.group_by, notes=notes))
    return {
        "comparison": rows,
        "partition": {part.key: part.value} if part else None,
        "settings": config.to_dict(),
        "input_rows": read,
        "spark_version": spark.version,
    }


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


def write_rejected(spark, rejected, stage: publish.Staging) -> Dict[str, Dict[str, int]]:
    """Write quarantined rows as ``rejected/<table>`` and count them per reason, as written."""
    counts: Dict[str, Dict[str, int]] = {"recommendations": {}, "relevance": {}}
    for table, frame in (rejected or {}).items():
        path = stage.table(f"rejected/{table}")
        storage.write_table(frame, path)
        for row in spark.read.parquet(path).groupBy("reason").count().collect():
            counts[table][row["reason"]] = row["count"]
    return counts


def check_connect(spark, config) -> None:
    """Over Spark Connect, refuse what the job could not do as documented (exit 2).

    The server resolves a relative path against its own working directory, and the client,
    which writes ``summary.json`` and ``report.html`` with its own file system (it has no
    Hadoop API), can reach only a local output: a relative path, or an output URI other than
    ``file:``, is refused.
    """
    if not storage.is_connect(spark):
        return
    inputs, output = config.inputs, config.output.path
    paths = [(key, getattr(inputs, key)) for key in ("recommendations", "relevance", "user_attributes")]
    paths += [("candidate", path) for path in getattr(config, "candidates", ())] + [("output", output)]
    for key, value in paths:
        if not value or (key != "output" and not storage.is_path(value)):
            continue
        if "://" not in value and not value.startswith("file:") and not os.path.isabs(value):
            raise ConfigError(
                f"{key} {value!r} is a relative path: over Spark Connect it would resolve on the server; "
                "give an absolute path or a URI"
            )
    scheme = output.split("://", 1)[0] if "://" in output else "file"
    if scheme != "file":
        raise ConfigError(
            f"output {output!r}: over Spark Connect the client writes summary.json and report.html with its "
            "own file system, which cannot reach a " + scheme + ":// URI; run the job with spark-submit "
            "(classic mode) or give a path the client and the server share"
        )


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
        if isinstance(as_error(exc), RowCheckFailed):
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


def quality_gates(config: EvaluateConfig, metrics: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Each ``--fail-below`` gate held against every segment it selects, with the segment's
    mean and whether it passed.

    A gate without a filter holds every segment (a null segment value included); one with a
    filter (``model=v2``) the segments whose value, as text, is the one given. A gate that
    selects no segment, or a segment without users in the mean, does not pass: a typo in a
    filter must not let a run through.
    """
    group_by = config.options.group_by
    checked = []
    for gate in config.gates:
        k, threshold = gate.k, gate.threshold
        rows = [m for m in metrics if gate.selects(m)]
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
                    "segment": dict(gate.where),
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


def finished_record(command: str, config, manifest: Dict[str, Any], status: str) -> Dict[str, Any]:
    """The ``ndcg_spark.finished`` JSON line: the figures per segment and k (``"all"`` for the
    whole list), and without segments also ``users`` and ``mean_ndcg`` keyed by k."""
    group_by, part = config.options.group_by, config.output.partition
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
    record = {"event": "ndcg_spark.finished", "command": command, "status": status, "output": config.output.path}
    record["partition"] = {part.key: part.value} if part else None
    if command != "compare" and not group_by:
        record["users"] = rows[0]["users"] if rows else 0
        record["mean_ndcg"] = {k_label(r["k"]): r["mean_ndcg"] for r in rows}
    record["figures"] = figures
    record["input_rows"] = manifest["input_rows"]
    record["duration_seconds"] = manifest["duration_seconds"]
    return record
