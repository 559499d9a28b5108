"""What every command does with its inputs: read each table with its format and schema, explain
a bad row by validating the tables, set aside quarantined rows, and account for every row read."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence

from ndcg_spark.errors import ConfigError, NdcgError, RowCheckFailed, input_errors
from ndcg_spark.options import EvaluationOptions
from ndcg_spark.reading import read_table
from ndcg_spark.validation import validate


def read_input(spark, config, role: str, source: Optional[str] = None, label: Optional[str] = None):
    """One input table of the job, with its format and schema (:func:`ndcg_spark.read_table`)."""
    inputs = config.inputs
    return read_table(
        spark,
        source if source is not None else getattr(inputs, role),
        inputs.format_of(role),
        role=role,
        schema=getattr(inputs, f"{role}_schema"),
        options=config.options,
        label=label,
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
        with input_errors():
            return compute()
    except RowCheckFailed:
        for recs in recommendations:
            validate(recs, relevance, opts)
        raise


def check_partition_column(partition, *frames) -> None:
    """The partition column must not be a column of what is written: its value would replace it."""
    if partition is None:
        return
    for df in frames:
        if partition.key in df.columns:
            raise ConfigError(f"partition column {partition.key!r} is also a column of the output; choose another name")


def write_rejected(rejected, stage: Any) -> Dict[str, Dict[str, int]]:
    """Write quarantined rows as ``rejected/<table>`` and count them per reason, as written."""
    counts: Dict[str, Dict[str, int]] = {"recommendations": {}, "relevance": {}}
    for table, frame in (rejected or {}).items():
        stage.write(f"rejected/{table}", frame)
        for row in stage.read(f"rejected/{table}").groupBy("reason").count().collect():
            counts[table][row["reason"]] = row["count"]
    return counts


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
                **(
                    {"seen in the user's interactions": sums["recommendations_seen"]}
                    if "recommendations_seen" in sums
                    else {}
                ),
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
    # The beyond-accuracy tables a run read (ndcg_spark._beyond.sources.counted_tables): every row
    # of the interactions and the items is used (a bad row stops the run); the baseline's beyond
    # its largest k are set aside as the recommendations' are.
    if "interactions" in read:
        tables["interactions"] = {"read": read["interactions"], "used": sums["interactions_used"], "set_aside": {}}
    if "items" in read:
        tables["items"] = {"read": read["items"], "used": sums["items_used"], "set_aside": {}}
    if "baseline_recommendations" in read:
        tables["baseline_recommendations"] = {
            "read": read["baseline_recommendations"],
            "used": sums["baseline_listed"],
            "set_aside": {"beyond the largest k": sums["baseline_beyond_k"]},
        }
    for table, t in tables.items():
        if t["read"] != t["used"] + sum(t["set_aside"].values()):
            raise NdcgError(
                f"row accounting of {table} does not add up: read {t['read']} != used {t['used']} + "
                f"set aside {sum(t['set_aside'].values())} {t['set_aside']}"
            )
    return tables
