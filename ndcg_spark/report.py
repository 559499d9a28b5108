"""``report.html`` pages: one self-contained HTML page (inline SVG, no scripts, no network) for an
evaluation or a comparison, built on the driver from a few collected rows.

:func:`ndcg_histogram` counts the per-user NDCG in bins in Spark (a few rows per segment and k);
:func:`render` makes the evaluation's page from the summary rows and those bins, and
:func:`render_comparison` the comparison's from the rows of
:meth:`ModelComparison.report <ndcg_spark.ModelComparison.report>` (or
:meth:`ComparisonResult.report <ndcg_spark.ComparisonResult.report>`). Nothing per user reaches
the driver.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from pyspark.sql import DataFrame

from ndcg_spark import _report, _report_compare
from ndcg_spark._charts import BINS
from ndcg_spark.options import EvaluationOptions


def ndcg_histogram(per_user: DataFrame, group_by: Sequence[str] = (), bins: int = BINS) -> DataFrame:
    """Counts of per-user NDCG in equal bins over [0, 1], per segment and k, counted in Spark.

    Parameters
    ----------
    per_user : DataFrame
        Per-user figures with the segment columns, ``k`` and ``ndcg``
        (:attr:`EvaluationResult.per_user <ndcg_spark.EvaluationResult.per_user>`).
    group_by : sequence of str
        The segment columns.
    bins : int
        The number of bins (1.0 falls in the last).

    Returns
    -------
    DataFrame
        Segment columns, ``k``, ``bin`` (0-based) and ``users``, for the bins that hold users. A
        user whose NDCG is not a finite number is in no bin.

    Examples
    --------
    >>> per_user = spark.createDataFrame([(1, 10, 0.0), (2, 10, 0.52), (3, 10, 1.0)], "user_id int, k int, ndcg double")
    >>> sorted(tuple(r) for r in ndcg_histogram(per_user, bins=4).collect())
    [(10, 0, 1), (10, 2, 1), (10, 3, 1)]
    """
    return _report.ndcg_histogram(per_user, group_by, bins)


def render(
    metrics: List[Dict[str, Any]],
    histogram: List[Dict[str, Any]],
    group_by: Sequence[str] = (),
    title: str = "ndcg-spark report",
    *,
    notes: Optional[Dict[str, Any]] = None,
    options: Optional[EvaluationOptions] = None,
    trend: Optional[List[Dict[str, Any]]] = None,
    trend_key: str = "run_date",
    verdict: Optional[Sequence[Tuple[bool, str]]] = None,
    limits: Sequence[Tuple[str, float]] = (),
) -> str:
    """An evaluation's report page: the summary table, mean NDCG@k per segment, the histograms of
    per-user NDCG and, when given, the run's verdict, its convention and the trend across runs.

    Parameters
    ----------
    metrics : list of dict
        The summary's rows (:attr:`EvaluationResult.summary <ndcg_spark.EvaluationResult.summary>`,
        collected, each as a dict).
    histogram : list of dict
        The rows of :func:`ndcg_histogram`, each as a dict.
    group_by : sequence of str
        The segment columns.
    title : str
        The page's title and heading.
    notes : dict, optional
        One line of settings under the title (name: value).
    options : EvaluationOptions, optional
        The options of the run: the page then names the convention and shows every switch that
        defines the figure as it resolved.
    trend : list of dict, optional
        Rows of the chart of mean NDCG@k across runs (``trend_key``, segments, ``k``,
        ``mean_ndcg``; the job's history makes them), this run among them.
    trend_key : str
        The column of ``trend`` that names each run.
    verdict : sequence of (bool, str), optional
        Each gate's (passed, line): the page then opens with PASSED or FAILED. Empty: no gate
        was set.
    limits : sequence of (str, float)
        (label, value) lines drawn on the trend chart (a gate's floor).

    Returns
    -------
    str
        The whole page.

    Examples
    --------
    >>> metrics = [{"k": 10, "users": 2, "mean_ndcg": 0.5, "mean_dcg": 0.8}]
    >>> page = render(metrics, [{"k": 10, "bin": 10, "users": 2}], notes={"gain": "linear"})
    >>> page.startswith("<!DOCTYPE html>") and "<title>ndcg-spark report</title>" in page
    True
    """
    return _report.render(
        metrics, histogram, group_by, title, notes=notes, options=options, trend=trend, trend_key=trend_key,
        verdict=verdict, limits=limits,
    )  # fmt: skip


def render_comparison(
    rows: List[Dict[str, Any]],
    group_by: Sequence[str] = (),
    title: str = "ndcg-spark comparison",
    *,
    notes: Optional[Dict[str, Any]] = None,
    margins: Optional[Mapping[Any, Sequence[float]]] = None,
    verdict: Optional[Sequence[Tuple[bool, str]]] = None,
) -> str:
    """A comparison's report page: the pairs' table and, per k, each pair's mean difference with
    its 95% interval.

    Parameters
    ----------
    rows : list of dict
        :meth:`ModelComparison.report <ndcg_spark.ModelComparison.report>`'s rows (each with
        ``baseline_model`` and ``candidate_model``).
    group_by : sequence of str
        The segment columns.
    title : str
        The page's title and heading.
    notes : dict, optional
        One line of settings under the title (name: value).
    margins : mapping of k to sequence of float, optional
        Non-inferiority margins per k, drawn on that k's chart as dashed lines at -margin.
    verdict : sequence of (bool, str), optional
        Each gate's (passed, line): the page then opens with PASSED or FAILED.

    Returns
    -------
    str
        The whole page.

    Examples
    --------
    >>> schema = "user_id int, item_id string, score double"
    >>> a = spark.createDataFrame([(1, "x", 0.9), (1, "y", 0.8), (2, "z", 0.9)], schema)
    >>> b = spark.createDataFrame([(1, "y", 0.9), (1, "x", 0.8), (2, "z", 0.9)], schema)
    >>> rel = spark.createDataFrame([(1, "y", 1.0), (2, "z", 1.0)], "user_id int, item_id string, relevance double")
    >>> page = render_comparison(compare_models({"a": a, "b": b}, rel, k=[2]).report(), margins={2: [0.05]})
    >>> '<table id="comparison">' in page and 'class="margin"' in page
    True
    """
    return _report_compare.render_comparison(rows, group_by, title, notes=notes, margins=margins, verdict=verdict)
