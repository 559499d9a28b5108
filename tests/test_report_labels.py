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


@browser
def test_the_beyond_accuracy_charts_are_drawn_clear_when_the_run_has_them(tmp_path):
    """With beyond-accuracy figures the page draws catalog coverage against k (two segments) and
    the exposure curve (100 bins of popularity rank, a long tail: the model's line above the
    interactions' at the head, then below), every label clear of the others and of the lines and
    inside its chart; without them, neither chart is there."""
    from tests.helpers import texts_outside_svgs

    metrics = [
        {"model": m, "k": k, "users": 900, "mean_ndcg": 0.3, "ndcg_ci_low": 0.29, "ndcg_ci_high": 0.31,
         "catalog_coverage": c * k / 20}
        for m, c in (("v1", 0.4), ("v2", 0.7))
        for k in (5, 10, 20)
    ]  # fmt: skip
    bins = [{"model": m, "k": k, "bin": 0, "users": 900} for m in ("v1", "v2") for k in (5, 10, 20)]
    weights = [1 / (b + 1) for b in range(100)]
    exposure = [
        {"bin": b, "first_rank": 30 * b + 1, "last_rank": 30 * b + 30, "items": 30,
         "exposure_share": w ** 1.3 / sum(x ** 1.3 for x in weights), "interaction_share": w / sum(weights)}
        for b, w in enumerate(weights)
    ]  # fmt: skip
    page = render(metrics, bins, ["model"], exposure=exposure, exposure_k=20)
    assert 'id="coverage-curve"' in page and 'id="exposure-curve"' in page
    assert "Exposure by popularity rank, k = 20" in page
    assert overlapping_texts(page, tmp_path) == []
    outside, lines = texts_outside_svgs(page, tmp_path, "polyline.exposure, polyline.coverage")
    assert outside == [] and lines == 4  # two coverage lines (one a model), the curve and the interactions'
    plain = render([{k: v for k, v in m.items() if k != "catalog_coverage"} for m in metrics], bins, ["model"])
    assert "coverage-curve" not in plain and "exposure-curve" not in plain
