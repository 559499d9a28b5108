"""The evaluation job: config (TOML + flags) -> read -> evaluate -> write.

``main(spark, config)`` does the work and is what tests call; ``run(argv)`` is the command line
(``ndcg-spark`` and ``spark-submit jobs/evaluate_ndcg.py``): it parses and validates the config
once, starts or joins a SparkSession, and turns every failure into one line on stderr and an
exit code (see :mod:`ndcg_spark.errors`).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
import time
import tomllib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ndcg_spark.errors import (
    EXIT_FAILURE,
    EXIT_OK,
    INPUT_ERROR_TAG,
    ConfigError,
    InputDataError,
    NdcgError,
    QualityGateFailed,
)
from ndcg_spark.options import EvaluationOptions, check_known_keys

FORMATS = ("parquet", "csv", "json", "orc")
#: Characters Spark escapes in partition directory names (and the space, which tools mangle).
UNSAFE_PARTITION_CHARS = '"#%\'*/:=?\\{}[]^ '


@dataclass(frozen=True)
class JobConfig:
    """Everything the job needs: where to read and write, and the evaluation options."""

    recommendations: str
    relevance: str
    output: str
    format: str = "parquet"
    master: Optional[str] = None
    run_date: Optional[str] = None
    partition: Optional[str] = None
    fail_below: Optional[str] = None
    user_attributes: Optional[str] = None
    remote: Optional[str] = None
    report: bool = True
    # `ndcg-spark compare` only: the candidate table (the baseline is `recommendations`), or a
    # model column with the two model names when both live in `recommendations`.
    candidate: Optional[str] = None
    model_col: Optional[str] = None
    baseline_model: Optional[str] = None
    candidate_model: Optional[str] = None
    options: EvaluationOptions = field(default_factory=EvaluationOptions)

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ConfigError(f"format = {self.format!r} is not one of {', '.join(FORMATS)}")
        if self.remote and self.master:
            raise ConfigError("give master or remote (Spark Connect), not both")
        if self.run_date is not None:
            try:
                datetime.date.fromisoformat(str(self.run_date))
            except ValueError:
                raise ConfigError(f"run_date = {self.run_date!r} is not a date of the form YYYY-MM-DD") from None
            if self.partition is not None:
                raise ConfigError("give run_date or partition, not both")
        self.partition_spec  # validates
        self.gates  # validates
        for name in ("recommendations", "relevance", "output"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{name} is required (a path or a catalog table); set it in the config or as --{name}")

    @property
    def partition_spec(self) -> Optional[Tuple[str, str]]:
        """(column, value) of the output partition this run owns, if any."""
        if self.run_date is not None:
            return ("run_date", str(self.run_date))
        if self.partition is None:
            return None
        key, sep, value = str(self.partition).partition("=")
        if not sep or not key.strip() or not value.strip() or "/" in value:
            raise ConfigError(f"partition = {self.partition!r} must look like key=value")
        # The partition is written as the directory key=value: characters that Spark escapes in
        # partition paths would be read back as another value.
        unsafe = sorted(set(UNSAFE_PARTITION_CHARS) & set(key.strip() + value.strip()))
        if unsafe:
            raise ConfigError(f"partition = {self.partition!r} holds characters not allowed in a partition: {' '.join(unsafe)}")
        if key.strip().startswith((".", "_")):
            # Spark's file listing skips such directories: the run would be written but never read.
            raise ConfigError(f"partition = {self.partition!r}: a partition column may not start with '.' or '_'")
        return (key.strip(), value.strip())

    @property
    def gates(self) -> List[Tuple[Optional[int], float]]:
        """Quality gates ``k:threshold`` parsed from ``fail_below`` ("10:0.25,5:0.2")."""
        if not self.fail_below:
            return []
        gates = []
        for part in str(self.fail_below).split(","):
            k_text, sep, threshold = part.strip().partition(":")
            try:
                k = None if k_text.strip().lower() == "all" else int(k_text)
                value = float(threshold)
            except ValueError:
                k, value = -1, float("nan")
            if not sep or (k is not None and k < 1) or not 0.0 <= value <= 1.0:
                raise ConfigError(f"fail_below = {self.fail_below!r}: expected k:threshold, e.g. 10:0.25")
            if k not in self.options.cutoffs:
                raise ConfigError(f"fail_below names k = {k_text.strip()}, which is not among the cutoffs computed")
            gates.append((k, value))
        return gates

    @classmethod
    def from_mapping(cls, values: Dict[str, Any]) -> "JobConfig":
        job_keys = [f.name for f in dataclasses.fields(cls) if f.name != "options"]
        option_keys = list(EvaluationOptions.names())
        check_known_keys(values, job_keys + option_keys, "config key")
        job = {k: v for k, v in values.items() if k in job_keys}
        opts = EvaluationOptions.from_mapping({k: v for k, v in values.items() if k in option_keys})
        missing = [k for k in ("recommendations", "relevance", "output") if k not in job]
        if missing:
            raise ConfigError(
                f"{missing[0]} is required (a path or a catalog table); set it in the config or as --{missing[0]}"
            )
        return cls(options=opts, **job)

    def to_dict(self) -> Dict[str, Any]:
        settings = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "options"}
        options = dataclasses.asdict(self.options)
        options["k"] = [("all" if k is None else k) for k in self.options.cutoffs]
        return {**settings, **options}


# ----------------------------------------------------------------------------- command line


def build_parser(compare: bool = False) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ndcg-spark compare" if compare else "ndcg-spark",
        description=(
            "Paired comparison of two models' NDCG@k: means, mean difference with its 95% interval, "
            "paired t-test p-value, wins/ties/losses."
            if compare
            else "Per-user and mean NDCG@k of recommendations against graded relevance, on Spark. "
            "'ndcg-spark compare --help' compares two models."
        ),
    )
    if compare:
        parser.add_argument("--baseline", dest="recommendations", help="Path or table of the baseline model.")
        parser.add_argument("--candidate", help="Path or table of the candidate model.")
        parser.add_argument("--model-col", dest="model_col", help="Or: one table (--recommendations) with this model column...")
        parser.add_argument("--baseline-model", dest="baseline_model", help="...this value for the baseline...")
        parser.add_argument("--candidate-model", dest="candidate_model", help="...and this one for the candidate.")
    parser.add_argument("--config", help="TOML file with any of the options below; flags override it.")
    parser.add_argument("--recommendations", help="Path or catalog table of the recommendations.")
    parser.add_argument("--relevance", help="Path or catalog table of the relevance judgements.")
    parser.add_argument("--format", help=f"Input format of paths: {', '.join(FORMATS)} (default parquet).")
    parser.add_argument("--output", help="Output directory (per_user/, summary/, summary.json).")
    parser.add_argument("--master", help="Spark master when not launched by spark-submit (default local[*]).")
    parser.add_argument("--run-date", dest="run_date", help="Write under run_date=YYYY-MM-DD, replacing only that partition.")
    parser.add_argument("--partition", help="Write under key=value, replacing only that partition.")
    parser.add_argument("--fail-below", dest="fail_below",
                        help="Quality gate k:threshold[,k:threshold]: exit 4 (after writing) when mean NDCG@k is below.")
    parser.add_argument("--user-attributes", dest="user_attributes",
                        help="Path or table with one row per user and segment columns for group_by.")
    parser.add_argument("--remote", help="Spark Connect URL, e.g. sc://host:15002/;token=... (instead of a local Spark).")
    parser.add_argument("--report", type=_parse_bool, metavar="true|false", help="Write DIR/report.html (default true).")
    parser.add_argument("--verbose", action="store_true", help="Print Spark's stack trace on errors.")
    for f in dataclasses.fields(EvaluationOptions):
        flag = "--" + f.name.replace("_", "-")
        # argparse %-formats help strings: a literal % (as in "95% interval") must be doubled.
        help_text = (f.metadata["help"] + f" (default: {_show_default(f.default)})").replace("%", "%%")
        if f.type in (bool, "bool"):
            parser.add_argument(flag, dest=f.name, type=_parse_bool, metavar="true|false", help=help_text)
        else:
            parser.add_argument(flag, dest=f.name, help=help_text)
    return parser


def _show_default(value: Any) -> str:
    return "all" if value is None else str(value)


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_config(argv: Sequence[str], compare: bool = False) -> tuple[JobConfig, bool]:
    """Config from the TOML file named by ``--config`` with the flags laid over it."""
    parser = build_parser(compare)
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:
        if exc.code == 0:  # --help: argparse printed it; the command ends there, successfully
            raise
        # argparse already printed its one-line reason
        raise ConfigError("invalid command line (see the message above)") from exc
    values: Dict[str, Any] = {}
    if args.config:
        values.update(load_toml(args.config))
    flags = {k: v for k, v in vars(args).items() if k not in ("config", "verbose") and v is not None}
    values.update(flags)
    config = JobConfig.from_mapping(values)
    if compare:
        check_compare_config(config)
    return config, args.verbose


def check_compare_config(config: JobConfig) -> None:
    by_model = [config.model_col, config.baseline_model, config.candidate_model]
    if config.candidate and any(by_model):
        raise ConfigError("give --candidate, or --model-col with --baseline-model and --candidate-model, not both")
    if not config.candidate and not all(by_model):
        raise ConfigError("compare needs --candidate, or --model-col with --baseline-model and --candidate-model")


def load_toml(path: str) -> Dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    # Paths written ./x or ../x in a config file are relative to the file itself; any other
    # value is left as it is (a bare name may be a catalog table, as on the command line).
    base = os.path.dirname(os.path.abspath(path))
    for key in ("recommendations", "relevance", "output", "user_attributes", "candidate"):
        value = data.get(key)
        if isinstance(value, str) and value.startswith(("./", "../")):
            data[key] = os.path.normpath(os.path.join(base, value))
    return data


# ----------------------------------------------------------------------------- the job


def read_table(spark, source: str, fmt: str, what: str):
    """A path (anything with a slash or a URI scheme, or that exists) or else a catalog table."""
    is_path = "/" in source or "://" in source or os.path.exists(source)
    try:
        if not is_path:
            return spark.read.table(source)
        reader = spark.read.format(fmt)
        if fmt == "csv":
            reader = reader.option("header", "true").option("inferSchema", "true")
        return reader.load(source)
    except Exception as exc:  # AnalysisException: path or table not found, unreadable format
        reason = _first_line(exc)
        raise InputDataError(f"cannot read {what} {source!r} as {fmt if is_path else 'a table'}: {reason}") from exc


def check_output(output: str) -> None:
    """Refuse to overwrite a local directory that holds something other than our own output."""
    path = output[len("file:"):] if output.startswith("file:") else output
    if "://" in path or not os.path.exists(path):
        return
    if not os.path.isdir(path):
        raise ConfigError(f"output {output} is a file, not a directory")
    entries = set(os.listdir(path))
    ours = {"per_user", "summary", "summary.json", "rejected", "_manifests", "report.html", "comparison",
            "comparison.json", ".summary.json.tmp", ".report.html.tmp", ".comparison.json.tmp"}
    if entries - ours:
        strange = sorted(entries - ours)[:3]
        raise ConfigError(
            f"output {output} already holds other data ({', '.join(strange) or 'unknown files'}); "
            "choose an empty directory or a previous ndcg-spark output"
        )


def main(spark, config: JobConfig) -> Dict[str, Any]:
    """Read both tables, validate, evaluate, write ``per_user/``, ``summary/`` (and ``rejected/``),
    then the manifest last (``summary.json``, or ``_manifests/<key>=<value>/summary.json`` for a
    partitioned run): its presence marks a complete result. Returns the manifest.
    """
    from ndcg_spark.core import evaluate
    from ndcg_spark.report import ndcg_histogram
    from ndcg_spark.report import render as render_report
    from ndcg_spark.validation import count_rows

    started = time.time()
    # Let adaptive execution coalesce the partitions of the cached per-user frame, or a small
    # input is written as spark.sql.shuffle.partitions tiny files.
    spark.conf.set("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
    check_output(config.output)
    recs = read_table(spark, config.recommendations, config.format, "recommendations")
    rel = read_table(spark, config.relevance, config.format, "relevance")
    attributes = None
    if config.user_attributes:
        attributes = read_table(spark, config.user_attributes, config.format, "user attributes")
    recs, options = as_rows(recs, dataclasses.asdict(config.options))
    read = count_rows(recs, rel, **options)
    result = evaluate(recs, rel, user_attributes=attributes, **options).persist()
    part = config.partition_spec
    try:
        # Computed (and cached) before anything is written, so bad input leaves the output as it was.
        explain_input_errors(lambda: result.scored.count(), [recs], rel, options)
        summary_df = result.summary
        check_partition_column(part, result.per_user, summary_df, *(result.rejected or {}).values())
        write_table(result.per_user, os.path.join(config.output, "per_user"), part)
        write_table(summary_df, os.path.join(config.output, "summary"), part)
        metrics = [row.asDict() for row in summary_df.collect()]
        sums = result.accounting.first().asDict()
        rejected = _write_rejected(spark, result, config.output, part)
        if config.report:
            bins = [r.asDict() for r in ndcg_histogram(result.per_user, config.options.group_by).collect()]
            page = render_report(metrics, bins, config.options.group_by, notes={
                "recommendations": config.recommendations, "relevance": config.relevance,
                "gain": config.options.gain, **({"partition": "=".join(part)} if part else {}),
            })
            _write_text(spark, manifest_dir(config), "report.html", page)
    finally:
        result.unpersist()
    rows = account_rows(read, rejected, sums)
    means = {m["k"]: m["mean_ndcg"] for m in metrics}
    gates = [
        {"k": k, "threshold": t, "mean_ndcg": means.get(k), "passed": means.get(k) is not None and means[k] >= t}
        for k, t in config.gates
    ]
    manifest = {
        "metrics": metrics,
        "rows": rows,
        "quality_gates": gates,
        "partition": dict([part]) if part else None,
        "settings": config.to_dict(),
        "input_rows": read,
        "spark_version": spark.version,
        "duration_seconds": round(time.time() - started, 3),
    }
    _write_manifest(spark, manifest_dir(config), manifest)
    return manifest


def as_rows(recs, options: Dict[str, Any]):
    """The recommendations in the 'rows' layout (ALS's 'array' layout exploded) and the options
    that read them, so that the row counts and the checks see one row per recommendation."""
    from ndcg_spark.core import recommendations_as_rows

    rows, opts = recommendations_as_rows(recs, EvaluationOptions.from_mapping(options))
    return rows, dataclasses.asdict(opts)


def explain_input_errors(compute, recommendations: Sequence[Any], relevance, options: Dict[str, Any]):
    """Run ``compute``; when a bad input row stops it, raise :func:`validate`'s message instead.

    The library's checks stop at the first bad row they meet and name it; only then is each table
    read again by ``validate``, which counts every problem and names up to five examples. So input
    that is fine is read once.
    """
    from ndcg_spark.validation import validate

    try:
        return compute()
    except NdcgError:
        raise
    except Exception as exc:
        if INPUT_ERROR_TAG in str(exc):
            for recs in recommendations:
                validate(recs, relevance, **options)
        raise


def compare_main(spark, config: JobConfig) -> Dict[str, Any]:
    """``ndcg-spark compare``: paired per-user NDCG of two models; writes ``per_user/`` (the pairs),
    ``comparison/`` and, last, ``comparison.json``."""
    from pyspark.sql import functions as F

    from ndcg_spark.compare import compare
    from ndcg_spark.validation import count_rows

    started = time.time()
    check_output(config.output)
    rel = read_table(spark, config.relevance, config.format, "relevance")
    recs = read_table(spark, config.recommendations, config.format, "recommendations")
    if config.model_col:
        if config.model_col not in recs.columns:
            raise InputDataError(f"recommendations table has no column {config.model_col!r} (it has: {', '.join(recs.columns)})")
        column = F.col(config.model_col).cast("string")
        baseline = recs.filter(column == config.baseline_model).drop(config.model_col)
        candidate = recs.filter(column == config.candidate_model).drop(config.model_col)
    else:
        baseline, candidate = recs, read_table(spark, config.candidate, config.format, "candidate")
    attributes = read_table(spark, config.user_attributes, config.format, "user attributes") if config.user_attributes else None
    options = dataclasses.asdict(config.options)
    baseline, options = as_rows(baseline, options)
    candidate, _ = as_rows(candidate, dataclasses.asdict(config.options))
    read = {"baseline": count_rows(baseline, rel, **options)}
    read["candidate"] = count_rows(candidate, rel, relevance_rows=read["baseline"]["relevance"], **options)
    result = compare(baseline, candidate, rel, user_attributes=attributes, **options)
    per_user = result.per_user.persist()
    try:
        # Computed (and cached) before anything is written, so bad input leaves the output as it was.
        explain_input_errors(per_user.count, [baseline, candidate], rel, options)
        check_partition_column(config.partition_spec, per_user, result.summary)
        write_table(per_user, os.path.join(config.output, "per_user"), config.partition_spec)
        rows = result.report()
    finally:
        per_user.unpersist()
    if rows:
        write_table(spark.createDataFrame(rows), os.path.join(config.output, "comparison"), config.partition_spec)
    manifest = {
        "comparison": rows,
        "settings": config.to_dict(),
        "input_rows": read,
        "spark_version": spark.version,
        "duration_seconds": round(time.time() - started, 3),
    }
    _write_manifest(spark, manifest_dir(config), manifest, "comparison.json")
    return manifest


def format_comparison(rows: List[Dict[str, Any]], group_by: Sequence[str] = ()) -> str:
    headers = ["k", *group_by, "pairs", "baseline", "candidate", "difference", "ci_low", "ci_high", "p_value",
               "wins", "ties", "losses"]
    keys = ["k", *group_by, "pairs", "mean_ndcg_baseline", "mean_ndcg_candidate", "mean_difference",
            "difference_ci_low", "difference_ci_high", "p_value", "wins", "ties", "losses"]

    def cell(key: str, value: Any) -> str:
        if key == "k":
            return "all" if value is None else str(value)
        if value is None:
            return "-"
        return f"{value:.6f}" if isinstance(value, float) else str(value)

    table = [[cell(k, r.get(k)) for k in keys] for r in rows]
    widths = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(t, widths)) for t in table]
    return "\n".join(lines)


def manifest_dir(config: JobConfig) -> str:
    part = config.partition_spec
    return config.output if part is None else os.path.join(config.output, "_manifests", partition_directory(part))


def check_partition_column(partition: Optional[Tuple[str, str]], *frames) -> None:
    """The partition column must not be a column of what is written: its value would replace it."""
    if partition is None:
        return
    for df in frames:
        if partition[0] in df.columns:
            raise ConfigError(
                f"partition column {partition[0]!r} is also a column of the output; choose another name"
            )


def write_table(df, path: str, partition: Optional[Tuple[str, str]]) -> None:
    """Parquet; under a partition, replace that partition only, even with an empty frame."""
    if partition is None:
        df.write.mode("overwrite").parquet(path)
        return
    # Written straight into its directory, which Spark's partition discovery reads back as the
    # column: a dynamic partition overwrite writes nothing for an empty frame (e.g. no rejected
    # rows), which would leave a previous run's rows of that partition in place.
    df.write.mode("overwrite").parquet(os.path.join(path, partition_directory(partition)))


def partition_directory(partition: Tuple[str, str]) -> str:
    """``key=value``, the directory Spark's partition discovery maps to the column ``key``."""
    return "=".join(partition)


def _write_rejected(spark, result, output: str, partition) -> Dict[str, Dict[str, int]]:
    """Write quarantined rows to ``DIR/rejected/<table>/`` and count them per reason."""
    counts: Dict[str, Dict[str, int]] = {"recommendations": {}, "relevance": {}}
    if not result.rejected:
        return counts
    for table, frame in result.rejected.items():
        path = os.path.join(output, "rejected", table)
        write_table(frame, path, partition)
        written = spark.read.parquet(path if partition is None else os.path.join(path, partition_directory(partition)))
        for row in written.groupBy("reason").count().collect():
            counts[table][row["reason"]] = row["count"]
    return counts


def account_rows(read: Dict[str, int], rejected: Dict[str, Dict[str, int]], sums: Dict[str, int]) -> Dict[str, Any]:
    """Every input row as used or set aside for a reason; raises if they do not add up."""
    recs_valid = read["recommendations"] - sum(rejected["recommendations"].values())
    tables = {
        "recommendations": {
            "read": read["recommendations"],
            "used": sums["recommendations_used"],
            "set_aside": {
                **{f"invalid: {k}": v for k, v in sorted(rejected["recommendations"].items())},
                "beyond the largest k": recs_valid - sums["recommendations_evaluated"],
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
        if min(t["set_aside"].values(), default=0) < 0 or t["read"] != t["used"] + sum(t["set_aside"].values()):
            raise NdcgError(
                f"row accounting of {table} does not add up: read {t['read']} != used {t['used']} + "
                f"set aside {sum(t['set_aside'].values())} {t['set_aside']}"
            )
    return tables


def _write_manifest(spark, output: str, manifest: Dict[str, Any], name: str = "summary.json") -> None:
    _write_text(spark, output, name, json.dumps(manifest, indent=2, default=str) + "\n")


def _write_text(spark, output: str, name: str, text: str) -> None:
    """Write one small file atomically (local paths) or through Spark (remote file systems)."""
    if "://" in output and not output.startswith("file:"):
        spark.createDataFrame([(text,)], "value string").coalesce(1).write.mode("overwrite").text(
            os.path.join(output, name + ".d")
        )
        return
    path = output[len("file:"):] if output.startswith("file:") else output
    os.makedirs(path, exist_ok=True)
    tmp = os.path.join(path, f".{name}.tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, os.path.join(path, name))


def format_summary(metrics: List[Dict[str, Any]], accounting: Optional[Dict[str, Any]] = None) -> str:
    """The summary as a fixed-width text table, then one line of row accounting per table."""
    segments = [c for c in (metrics[0] if metrics else {}) if c not in _SUMMARY_FIELDS]
    columns = ["k", *segments, "users", "mean_ndcg", "ndcg_ci_low", "ndcg_ci_high", "mean_dcg", "std_ndcg",
               "users_zero_idcg", "users_without_recommendations", "users_excluded"]
    headers = ["k", *segments, "users", "mean_ndcg", "ci_low", "ci_high", "mean_dcg", "std_ndcg", "zero_idcg",
               "no_recs", "excluded"]

    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.6f}"
        return str(value)

    table_rows = [["all" if m["k"] is None else str(m["k"])] + [cell(m[c]) for c in columns[1:]] for m in metrics]
    widths = [max(len(h), *(len(r[i]) for r in table_rows)) if table_rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in table_rows]
    for table, t in (accounting or {}).items():
        aside = ", ".join(f"{k} {v}" for k, v in t["set_aside"].items() if v)
        lines.append(f"{table}: read {t['read']} = used {t['used']}" + (f" + {aside}" if aside else ""))
    return "\n".join(lines)


_SUMMARY_FIELDS = {
    "k", "users", "mean_ndcg", "ndcg_ci_low", "ndcg_ci_high", "mean_dcg", "std_ndcg", "users_zero_idcg",
    "users_without_recommendations", "users_without_relevance", "users_excluded", "duplicate_recommendations",
    "duplicate_relevance", "mean_precision", "mean_recall", "mean_ap", "mean_rr", "hit_rate",
}


def _first_line(exc: BaseException) -> str:
    for line in str(exc).strip().splitlines():
        line = line.strip()
        if line:
            return line.split(" SQLSTATE:")[0]
    return type(exc).__name__


def classify_error(exc: BaseException) -> tuple[int, str]:
    """Exit code and one-line message for any exception the job can meet."""
    if isinstance(exc, NdcgError):
        return exc.exit_code, str(exc).splitlines()[0]
    text = str(exc)
    if INPUT_ERROR_TAG in text:
        tail = text[text.index(INPUT_ERROR_TAG) + len(INPUT_ERROR_TAG):].lstrip(": ")
        return InputDataError.exit_code, "invalid input: " + tail.splitlines()[0].split(" SQLSTATE:")[0]
    return EXIT_FAILURE, f"{type(exc).__name__}: {_first_line(exc)}"


def run(argv: Optional[Sequence[str]] = None) -> int:
    """Command-line entry point; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    verbose = "--verbose" in argv
    spark = None
    try:
        if argv and argv[0] == "compare":
            config, verbose = parse_config(argv[1:], compare=True)
            spark = _spark_session(config)
            manifest = compare_main(spark, config)
            print(format_comparison(manifest["comparison"], config.options.group_by))
            print(f"wrote {config.output}")
            return EXIT_OK
        config, verbose = parse_config(argv)
        spark = _spark_session(config)
        manifest = main(spark, config)
        print(format_summary(manifest["metrics"], manifest["rows"]))
        print(f"wrote {config.output}")
        failed = [g for g in manifest["quality_gates"] if not g["passed"]]
        print(json.dumps(log_record(config, manifest, "quality_gate_failed" if failed else "ok")), flush=True)
        if failed:
            g = failed[0]
            raise QualityGateFailed(
                f"quality gate failed: mean NDCG@{'all' if g['k'] is None else g['k']} = {g['mean_ndcg']:.6f} "
                f"is below {g['threshold']} (outputs were written)"
            )
        return EXIT_OK
    except BaseException as exc:  # noqa: BLE001 - every failure becomes one line and an exit code
        if isinstance(exc, KeyboardInterrupt):
            raise
        if isinstance(exc, SystemExit) and exc.code == 0:  # --help was printed
            return EXIT_OK
        code, message = classify_error(exc)
        if verbose:
            import traceback

            traceback.print_exc()
        print(f"ndcg-spark: error: {message}", file=sys.stderr)
        return code


def log_record(config: JobConfig, manifest: Dict[str, Any], status: str) -> Dict[str, Any]:
    """One JSON line with the headline figures, for scheduler logs."""
    return {
        "event": "ndcg_spark.finished",
        "status": status,
        "output": config.output,
        "partition": manifest["partition"],
        "users": manifest["metrics"][0]["users"] if manifest["metrics"] else 0,
        "mean_ndcg": {("all" if m["k"] is None else str(m["k"])): m["mean_ndcg"] for m in manifest["metrics"]},
        "input_rows": manifest["input_rows"],
        "duration_seconds": manifest["duration_seconds"],
    }


def _spark_session(config: JobConfig):
    """Join the session spark-submit started, or start a local one with quiet logs."""
    from pyspark.sql import SparkSession

    if config.remote:
        return SparkSession.builder.remote(config.remote).getOrCreate()
    builder = SparkSession.builder.appName("ndcg-spark")
    if config.master:
        builder = builder.master(config.master)
    if not os.environ.get("SPARK_ENV_LOADED") and "pyspark-shell" not in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        # Launched as a plain Python program: keep stderr for our one-line messages.
        log_conf = os.path.join(os.path.dirname(__file__), "log4j2.properties")
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log_conf}")
        builder = builder.config("spark.ui.showConsoleProgress", "false")
    return builder.getOrCreate()


def entrypoint() -> None:
    sys.exit(run())
