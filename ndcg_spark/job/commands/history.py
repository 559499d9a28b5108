"""``ndcg-spark history``: the runs of an output as a table (or one JSON document), a line per
broken run and per night a run left unfinished; and the report's trend rows, from the same runs.

The runs are what the output's kind reads (:class:`~ndcg_spark.job.outputs.contract.Runs`):
the markers of a directory, the runs view of a table family.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ndcg_spark.job.config.parsing import HistoryConfig
from ndcg_spark.job.config.targets import RUN_DATE
from ndcg_spark.job.console import text_table
from ndcg_spark.job.outputs import kinds
from ndcg_spark.job.outputs.contract import Runs
from ndcg_spark.job.result import RunResult, gates_summary, strict_json

#: Figures of each summary row the history shows: (summary column, header).
HISTORY_COLUMNS = (
    ("users", "users"),
    ("mean_ndcg", "mean_ndcg"),
    ("ndcg_ci_low", "ci_low"),
    ("ndcg_ci_high", "ci_high"),
    ("users_zero_idcg", "zero_idcg"),
    ("users_without_recommendations", "no_recs"),
    ("users_without_relevance", "no_relevance"),
    ("users_excluded", "excluded"),
)


# ----------------------------------------------------------------------------- the history table


def history_rows(runs: Sequence[Tuple[str, RunResult]], key: str = RUN_DATE) -> List[Dict[str, Any]]:
    """One row per run, segment and k: the partition value under ``key``, the segment columns,
    ``k`` and the figures of :data:`HISTORY_COLUMNS` (``None`` where a run did not record one)."""
    rows = []
    segments = history_segments(runs)
    for value, result in runs:
        gates = gates_summary(result)
        for m in result.metrics:
            row = {key: value, **{c: m.get(c) for c in segments}, "k": m.get("k")}
            row.update({c: m.get(c) for c, _ in HISTORY_COLUMNS})
            row["gates"] = gates
            rows.append(row)
    return rows


def history_segments(runs: Sequence[Tuple[str, RunResult]]) -> List[str]:
    """The segment columns of any of the runs, in the order first met."""
    seen: List[str] = []
    for _, result in runs:
        seen += [c for c in result.group_by if c not in seen]
    return seen


def format_history(rows: List[Dict[str, Any]], segments: Sequence[str] = (), key: str = RUN_DATE) -> str:
    """The history as a fixed-width table (``k``, the partition value, the segments, the figures)."""
    if not rows:
        return "no complete run"
    # The run's gates last: a few words that would push the figures apart if they stood first.
    return text_table(rows, (*HISTORY_COLUMNS, ("gates", "gates")), [key, *segments])


def history_record(
    output: str, rows: List[Dict[str, Any]], key: str = RUN_DATE, broken: Optional[Dict[str, List[str]]] = None
) -> Dict[str, Any]:
    """The history as ``--json`` prints it: the output, the partition key, the runs, their rows,
    and the runs whose tables are gone (``broken``: value -> the missing tables)."""
    runs = sorted({r[key] for r in rows})
    return {"output": output, "key": key, "runs": runs, "rows": rows, "broken": broken or {}}


def broken_lines(broken: Dict[str, List[str]], key: str = RUN_DATE) -> List[str]:
    """One line per run whose manifest stands but whose tables are gone."""
    return [
        f"broken: {key}={value}: its {', '.join(tables)} table(s) are missing (the figures are its manifest's; "
        "the regression gate skips it; re-run the date to restore it)"
        for value, tables in sorted(broken.items())
    ]


def trend_rows(
    runs: Sequence[Tuple[str, RunResult]],
    current: Optional[Tuple[str, List[Dict[str, Any]]]] = None,
    key: str = RUN_DATE,
    last: int = 14,
    group_by: Sequence[str] = (),
) -> List[Dict[str, Any]]:
    """The rows of the report's trend chart: the history rows of the ``last`` runs, tonight's
    (``(value, metrics)`` segmented by ``group_by``, whose manifest is not written yet when the
    report is) in place of a run of the same value."""
    runs = [(v, m) for v, m in runs if current is None or v != current[0]]
    if current is not None:
        runs.append((current[0], RunResult("evaluate", {"group_by": list(group_by)}, metrics=tuple(current[1]))))
    runs.sort(key=lambda run: run[0])
    return history_rows(runs[-last:] if last > 0 else [], key)


def history_text(earlier: Runs, *, key: str = RUN_DATE, last: Optional[int] = None, as_json: bool = False) -> str:
    """What ``ndcg-spark history`` prints for the runs ``earlier`` holds:
    the table of :func:`format_history`, a line per broken run (:func:`broken_lines`) and one per
    night a run left unfinished (:meth:`~ndcg_spark.job.outputs.contract.Runs.unfinished`), or with ``as_json`` the one JSON
    document of :func:`history_record` (with ``unfinished``)."""
    runs = earlier.history(key, last)
    broken = {v: m for v, m in ((v, earlier.missing(v, key, m)) for v, m in runs) if m}
    # The nights a run left unfinished; an interrupted publish with its staged figures among the runs.
    nights = earlier.unfinished(key)
    staged = {n.value: n.result for n in nights if n.result is not None}
    runs = sorted([(v, r) for v, r in runs if v not in staged] + list(staged.items()), key=lambda run: run[0])
    runs = runs[-last:] if last else runs
    if last and runs:
        nights = [n for n in nights if n.value >= runs[0][0]]
    rows = history_rows(runs, key)
    if as_json:
        record = history_record(earlier.root, rows, key, broken)
        record["unfinished"] = {n.value: n.to_json() for n in nights}
        return strict_json(record)
    table = format_history(rows, history_segments(runs), key)
    return "\n".join([table, *broken_lines(broken, key), *(n.line(key) for n in nights)])


def show(spark, config: HistoryConfig) -> str:
    """The text ``ndcg-spark history`` prints for ``config`` (``spark`` None: a local output read
    without Spark, :func:`reads_without_spark`)."""
    runs = kinds.runs_for(spark, config)
    return history_text(runs, key=runs.key(), last=config.last, as_json=config.as_json)


def reads_without_spark(config: HistoryConfig) -> bool:
    """Whether ``history`` reads the runs of ``config``'s output without starting Spark: its kind
    reads them so (a local folder of ours), and no master or Spark Connect server was named."""
    return kinds.reads_without_spark(config) and not (config.master or config.remote)
