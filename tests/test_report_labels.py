"""report.html's labels stay clear of each other and of the lines, as Chromium lays them out: a
gate's limit is named in the legend, not on the trend lines it runs among, and the tallest bar's
count sits under the count axis' title."""

from __future__ import annotations

from ndcg_spark.report import render
from tests.helpers import browser, overlapping_texts


@browser
def test_no_label_of_the_report_overlaps_another_or_a_line(tmp_path):
    nights = [f"2026-11-{d:02d}" for d in range(15, 22)]
    # Two k whose lines cross the drop gate's limit (0.40) and the floor (0.38) night after night.
    trend = [
        {"run_date": n, "k": k, "mean_ndcg": 0.40 + (0.03 if (i + k) % 2 else -0.03), "ndcg_ci_low": None,
         "ndcg_ci_high": None}
        for i, n in enumerate(nights)
        for k in (5, 10)
    ]  # fmt: skip
    metrics = [{"k": k, "users": 12000, "mean_ndcg": 0.37, "ndcg_ci_low": 0.36, "ndcg_ci_high": 0.38} for k in (5, 10)]
    # Most users in the first bin (NDCG 0): the tallest bar stands at the plot's top-left corner.
    bins = [{"k": k, "bin": b, "users": n} for k in (5, 10) for b, n in ((0, 11000), (5, 700), (19, 300))]
    limits = [("lowest NDCG@10 the drop gate allows", 0.40), ("floor of NDCG@5", 0.38)]
    page = render(metrics, bins, trend=trend, limits=limits)
    assert overlapping_texts(page, tmp_path) == []
    assert page.count('class="legend limit"') == 2  # the limits, named in the legend
