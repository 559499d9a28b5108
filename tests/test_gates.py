"""compare's non-inferiority gate (--fail-if-worse) and its margin on the report's difference chart."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from scipy import stats

from ndcg_spark import compare_models, evaluate
from ndcg_spark.errors import ConfigError
from ndcg_spark.job.config.gate_specs import Gate, margins_by_k, parse_gates
from ndcg_spark.job.gates.holding import check
from ndcg_spark.job.gates.wording import worse_failure
from ndcg_spark.report import render_comparison
from tests.helpers import browser, frames, layout_at, random_graded

pytestmark = pytest.mark.job  # the job's tests: left out of the library's loop (CONTRIBUTING.md)

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def three_models(spark):
    """The baseline, the same model again, and one that scores items at random (worse)."""
    recs, rels = random_graded(seed=11, users=80)
    rng = np.random.default_rng(4)
    # The baseline ranks by the judged grade (with noise); the worse model by noise alone.
    recs = {u: {i: rels[u].get(i, 0) + float(rng.random()) for i in m} for u, m in recs.items()}
    worse = {u: {i: float(rng.random()) for i in m} for u, m in recs.items()}
    base, rel = frames(spark, recs, rels)
    bad, _ = frames(spark, worse, rels)
    return {"prod": base, "same": base, "random": bad}, rel


def test_non_inferiority_fails_the_candidate_whose_interval_lies_below_the_margin(spark, three_models):
    models, rel = three_models
    rows = compare_models(models, rel, k=[10]).report()
    checked = check(parse_gates("worse", "10:0.01", (), [10]), rows)
    assert [(g.candidate_model, g.passed) for g in checked] == [("same", True), ("random", False)]
    # The oracle: each model's per-user NDCG@10 paired by user, the t interval of the differences.
    per_user = {
        n: {r.user_id: r.ndcg for r in evaluate(df, rel, k=[10]).per_user.collect()} for n, df in models.items()
    }
    for g in checked:
        a, b = per_user["prod"], per_user[g.candidate_model]
        d = np.array([b[u] - a[u] for u in sorted(a)])
        if d.std() == 0:
            high = d.mean()
        else:
            high = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))[1]
        assert g.difference_ci_high == pytest.approx(high, abs=1e-9)
        assert g.passed == (high >= -0.01)
    message = worse_failure([g for g in checked if not g.passed])
    assert "\n" not in message
    assert re.fullmatch(
        r"non-inferiority gate failed: random vs prod is worse at NDCG@10 by more than 0\.01: difference -0\.\d{6}, "
        r"95% interval \[-0\.\d{6}, -0\.\d{6}\] over 80 users \(outputs were written\)",
        message,
    ), message


def row(high, low=None, candidate="v2", segment="a", k=10, pairs=50):
    mean = high - 0.01 if low is None else (low + high) / 2
    return {
        "baseline_model": "prod",
        "candidate_model": candidate,
        "segment": segment,
        "k": k,
        "pairs": pairs,
        "mean_difference": mean,
        "difference_ci_low": mean - 0.01 if low is None else low,
        "difference_ci_high": high,
    }


@pytest.mark.parametrize(
    "gate, rows, passed",
    [
        ("10:0.01", [row(-0.02)], [False]),  # surely worse by more than 0.01
        ("10:0.01", [row(-0.005)], [True]),  # worse, but maybe by less than the margin
        ("10:0.01", [row(-0.01)], [True]),  # on the margin: not below it
        ("10:0", [row(-0.001)], [False]),  # no margin: any sure loss fails
        ("10:0.01", [{**row(0.0), "difference_ci_low": None, "difference_ci_high": None, "pairs": 1}], [True]),
        ("segment=b:10:0.01", [row(-0.5)], [False]),  # selects no row: fails (a typo lets nothing through)
        ("candidate_model=v3:10:0.01", [row(-0.5), row(-0.5, candidate="v3")], [False]),
        ("candidate_model=v2:10:0.01", [row(0.1), row(-0.5, candidate="v3")], [True]),
        ("5:0.01", [row(-0.5), row(0.1, k=5)], [True]),
        ("all:0.01", [row(-0.5), row(-0.5, k=None)], [False]),
    ],
)
def test_non_inferiority_decision(gate, rows, passed):
    checked = check(parse_gates("worse", gate, ["segment"], [5, 10, None]), rows, ["segment"])
    assert [g.passed for g in checked] == passed


def test_a_gate_that_selects_nothing_says_so():
    checked = check(parse_gates("worse", "segment=b:10:0.01", ["segment"]), [row(0.1)], ["segment"])
    assert worse_failure(checked) == (
        "non-inferiority gate failed: no comparison row segment=b at NDCG@10 to hold against margin 0.01 "
        "(outputs were written)"
    )


@pytest.mark.parametrize(
    "spec, message",
    [
        ("10:1%", "fail_if_worse = '10:1%': expected [column=value:]k:margin, e.g. 10:0.01 or model=v2:10:0.01"),
        ("10", "expected [column=value:]k:margin"),
        ("20:0.01", "fail_if_worse names k = 20, which is not among the cutoffs computed"),
        ("model=v2:10:0.01", "model is not a column to filter on (segment, baseline_model, candidate_model)"),
    ],
)
def test_worse_gate_bad_spelling_is_one_line(spec, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        parse_gates("worse", spec, ["segment"], [5, 10])
    assert "\n" not in str(caught.value)


def test_worse_gate_spelling():
    gates = parse_gates("worse", "candidate_model=v2&segment=a:10:0.01,all:0.02", ["segment"])
    assert gates == (
        Gate("worse", (("candidate_model", "v2"), ("segment", "a")), 10, 0.01),
        Gate("worse", (), None, 0.02),
    )
    assert margins_by_k(gates + parse_gates("worse", "10:0.03")) == {10: [0.01, 0.03], None: [0.02]}


def charts(page):
    """{chart title: svg element} of the page's difference charts."""
    found = {}
    for svg in re.findall(r'<svg class="differences".*?</svg>', page):
        element = ET.fromstring(svg)
        found[element.find(f"{SVG}text").text] = element
    return found


def test_compare_report_draws_each_margin_on_its_k(spark):
    rows = [row(0.004, low=-0.002, k=5), row(0.004, low=-0.002, k=10)]
    page = render_comparison(rows, ["segment"], margins={10: [0.01, 0.03]})
    by_k = charts(page)
    assert set(by_k) == {"NDCG@5", "NDCG@10"}
    assert by_k["NDCG@5"].findall(f"{SVG}line[@class='margin']") == []
    margins = by_k["NDCG@10"].findall(f"{SVG}line[@class='margin']")
    assert [m.find(f"{SVG}title").text for m in margins] == [
        "non-inferiority margin -0.01",
        "non-inferiority margin -0.03",
    ]
    # The scale reaches the widest margin (0.03 > the intervals' 0.004): its ends are -0.03 and +0.03.
    ends = [t.text for t in by_k["NDCG@10"].findall(f"{SVG}text") if t.get("class") == "axis"]
    assert ends == ["-0.03", "0", "+0.03"]
    left, right = 300, 620 - 24  # the plot between the labels and the right edge
    xs = [float(m.get("x1")) for m in margins]
    assert xs == pytest.approx([left + (right - left) * (0.03 - m) / 0.06 for m in (0.01, 0.03)], abs=0.06)
    # The pair is drawn where the chart without a margin would draw it, on the wider scale.
    dot = by_k["NDCG@10"].find(f"{SVG}circle")
    assert float(dot.get("cx")) == pytest.approx(left + (right - left) * (0.001 + 0.03) / 0.06, abs=0.06)
    # Without margins the page is as before.
    assert render_comparison(rows, ["segment"]) == render_comparison(rows, ["segment"], margins={})
    assert 'class="margin"' not in render_comparison(rows, ["segment"])


@browser
def test_a_failed_compare_page_says_so_on_its_first_screen_and_fits_1280_pixels(tmp_path):
    # Three long-named candidates in two segments: the widest pairs table the page draws.
    rows = [
        dict(row(-0.02 * i, low=-0.02 * i - 0.005), baseline_model="als-baseline-2026-11-20",
             candidate_model=f"two-tower-retrieval-candidate-{i}", segment=s, p_value=9e-17, p_value_adjusted=2.7e-16,
             t_statistic=-9.5, wins=100, ties=300, losses=211, mean_ndcg_baseline=0.3, mean_ndcg_candidate=0.28)
        for i in range(3)
        for s in ("kr", "us")
    ]  # fmt: skip
    verdict = [(False, "non-inferiority gate failed: two-tower-retrieval-candidate-2 vs als-baseline is worse")]
    page = render_comparison(rows, ["segment"], margins={10: [0.01]}, verdict=verdict)
    layout = layout_at(page, tmp_path)
    assert layout["scroll_width"] <= 1280 and 0 < layout["verdict_bottom"] <= 800, layout
