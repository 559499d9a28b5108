"""The runs of an output (markers, history table, trend chart) and the regression gate against the last run."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from scipy import stats

from ndcg_spark import evaluate
from ndcg_spark.errors import ConfigError
from ndcg_spark.job.commands import evaluate as evaluate_command
from ndcg_spark.job.commands import history
from ndcg_spark.job.config.gate_specs import Gate, parse_gates
from ndcg_spark.job.gates import regression
from ndcg_spark.job.gates.holding import check
from ndcg_spark.job.outputs import files as output_files
from ndcg_spark.job.outputs.directory import runs as directory_runs
from ndcg_spark.job.result import RunResult, strict_json
from ndcg_spark.report import trend_chart
from tests.helpers import browser, frames, random_graded, texts_outside_svgs

pytestmark = pytest.mark.job  # the job's tests: left out of the library's loop (CONTRIBUTING.md)

NIGHTS = ("2026-11-20", "2026-11-21", "2026-11-22")
SVG = "{http://www.w3.org/2000/svg}"


def write_file(spark, output, path, text):
    output_files.files_for(spark, output).write_text(f"{output}/{path}", text)


def write_run(spark, output, date, per_user, manifest):
    """What a complete run leaves: its per-user partition, then its marker (the manifest)."""
    per_user.write.parquet(f"{output}/per_user/run_date={date}")
    write_file(spark, output, f"_manifests/run_date={date}/summary.json", strict_json(manifest))


def publish(spark, output, date, result, group_by):
    """A run of the evaluation as the job publishes it."""
    metrics = [r.asDict() for r in result.summary.collect()]
    manifest = {
        "metrics": metrics,
        "rows": {},
        "quality_gates": [],
        "partition": {"run_date": date},
        "settings": {"group_by": list(group_by), "k": [5, 10], "convention": None, "gain": "linear"},
        "input_rows": {},
        "spark_version": spark.version,
        "duration_seconds": 1.0,
    }
    write_run(spark, output, date, result.per_user, manifest)
    return manifest


@pytest.fixture(scope="module")
def nightly(spark, tmp_path_factory):
    """Three nights into one output, by segment; the third night's model re-scores items at random."""
    output = str(tmp_path_factory.mktemp("nightly") / "out")
    recs, rels = random_graded(seed=7, users=60)
    rng = np.random.default_rng(5)
    attributes = spark.createDataFrame([(u, "a" if u % 2 else "b") for u in range(60)], "user_id int, segment string")
    nights = []
    for night, date in enumerate(NIGHTS):
        tonight = {u: dict(m) for u, m in recs.items() if not (night == 1 and u >= 55)}  # night 2 misses 5 users
        if night == 2:
            tonight = {u: {i: float(rng.random()) for i in m} for u, m in tonight.items()}
        rec_df, rel_df = frames(spark, tonight, {u: rels[u] for u in tonight})
        result = evaluate(rec_df, rel_df, k=[5, 10], group_by=["segment"], user_attributes=attributes).persist()
        nights.append((date, publish(spark, output, date, result, ["segment"]), result))
    return output, nights


def test_complete_runs_are_those_with_a_marker(spark, nightly, monkeypatch):
    output, nights = nightly
    write_file(spark, output, "_manifests/run_date=2026-11-23/report.html", "<p>unfinished</p>")
    write_file(spark, output, "_manifests/_staging/summary.json", "{}")
    write_file(spark, output, "_manifests/country=kr/summary.json", "{}")
    assert directory_runs.complete_runs(output_files.files_for(spark, output)) == list(NIGHTS)
    assert directory_runs.complete_runs(output_files.files_for(spark, output), key="country") == ["kr"]
    assert directory_runs.complete_runs(output_files.files_for(spark, output + "/nothing-here")) == []
    assert directory_runs.previous_run(output_files.files_for(spark, output), "2026-11-22") == "2026-11-21"
    assert directory_runs.previous_run(output_files.files_for(spark, output), "2026-11-24") == "2026-11-22"
    assert directory_runs.previous_run(output_files.files_for(spark, output), NIGHTS[0]) is None
    written = json.loads(json.dumps(nights[1][1], default=str))
    assert directory_runs.read_manifest(output_files.files_for(spark, output), NIGHTS[1]) == RunResult.from_json(
        written, "evaluate"
    )
    runs = directory_runs.read_history(output_files.files_for(spark, output), last=2)
    assert [v for v, _ in runs] == list(NIGHTS[1:])
    # Over Spark Connect the client lists and reads the local output with its own file system.
    classic = directory_runs.read_history(output_files.files_for(spark, output), before=NIGHTS[2])
    monkeypatch.setattr(output_files, "is_connect", lambda spark: True)
    assert directory_runs.complete_runs(output_files.files_for(spark, "file:" + output)) == list(NIGHTS)
    assert directory_runs.read_history(output_files.files_for(spark, output), before=NIGHTS[2]) == classic
    assert [v for v, _ in classic] == list(NIGHTS[:2])


def test_history_rows_table_and_json(spark, nightly):
    output, nights = nightly
    runs = directory_runs.read_history(output_files.files_for(spark, output))
    rows = history.history_rows(runs)
    expected = [
        {
            "run_date": date,
            "segment": m["segment"],
            "k": m["k"],
            **{c: m[c] for c, _ in history.HISTORY_COLUMNS},
            "gates": "-",  # these nights set no gate
        }
        for date, manifest, _ in nights
        for m in manifest["metrics"]
    ]
    assert rows == expected and len(rows) == 3 * 2 * 2
    assert history.history_segments(runs) == ["segment"]
    table = history.format_history(rows, ["segment"]).splitlines()
    assert table[0].split() == ["k", "run_date", "segment", *[h for _, h in history.HISTORY_COLUMNS], "gates"]
    assert len(table) == 1 + len(rows) and all(any(d in line for d in NIGHTS) for line in table[1:])
    record = json.loads(json.dumps(history.history_record(output, rows)))
    assert record["runs"] == list(NIGHTS) and record["rows"] == rows and record["key"] == "run_date"
    assert history.format_history([]) == "no complete run"


def per_user_frame(spark, rows):
    return spark.createDataFrame(rows, "segment string, user_id int, k int, ndcg double")


def test_paired_change_matches_a_paired_t_interval_on_the_users_in_common(spark):
    rng = np.random.default_rng(3)
    before, after = [], []
    for segment in ("a", None):
        for k in (5, None):
            for u in range(30):
                if u < 25:
                    before.append((segment, u, k, float(rng.random())))
                if u >= 3:  # users 3..24 are in both
                    after.append((segment, u, k, float(rng.random())))
    changes = regression.paired_change(
        per_user_frame(spark, after), per_user_frame(spark, before), ["segment"], "user_id"
    )
    assert [(r["segment"], r["k"]) for r in changes] == [("a", 5), ("a", None), (None, 5), (None, None)]
    for r in changes:
        prev = {u: v for s, u, k, v in before if s == r["segment"] and k == r["k"]}
        cur = {u: v for s, u, k, v in after if s == r["segment"] and k == r["k"]}
        common = sorted(set(prev) & set(cur))
        d = np.array([cur[u] - prev[u] for u in common])
        assert r["users_in_common"] == len(common) == 22
        assert r["mean_previous"] == pytest.approx(np.mean([prev[u] for u in common]), abs=1e-12)
        assert r["mean_current"] == pytest.approx(np.mean([cur[u] for u in common]), abs=1e-12)
        assert r["mean_difference"] == pytest.approx(d.mean(), abs=1e-12)
        low, high = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
        assert (r["difference_ci_low"], r["difference_ci_high"]) == pytest.approx((low, high), abs=1e-9)


def test_paired_change_refuses_a_previous_run_with_other_segments(spark):
    now = per_user_frame(spark, [("a", 1, 5, 0.5)])
    with pytest.raises(Exception, match="has no column 'segment'"):
        regression.paired_change(now, now.drop("segment"), ["segment"], "user_id")


def test_regression_gate_fails_the_worse_night_and_names_what_it_compared(spark, nightly):
    output, nights = nightly
    gates = parse_gates("drop", "10:0.02", ["segment"], [5, 10])
    outcome = evaluate_command.drop_gate(
        spark,
        directory_runs.DirectoryRuns(output_files.files_for(spark, output)),
        NIGHTS[2],
        nights[2][2].per_user,
        gates,
        ["segment"],
        "user_id",
    )
    assert outcome.previous == NIGHTS[1] and outcome.failed
    # The oracle: tonight's and last night's per-user NDCG@10, paired by user, per segment.
    both = {}
    for night in (1, 2):
        for r in nights[night][2].per_user.filter("k = 10").collect():
            both.setdefault((r.segment, r.user_id), {})[night] = r.ndcg
    for g in outcome.checked:
        d = np.array([v[2] - v[1] for (s, _), v in both.items() if s == g.segment["segment"] and len(v) == 2])
        assert g.users == len(d) and len(d) > 20
        assert g.mean_difference == pytest.approx(d.mean(), abs=1e-12)
        assert g.passed is False and -d.mean() > 0.02
    # Night 2 had 55 of the 60 users: only those are paired.
    assert sum(g.users for g in outcome.checked) == sum(len(v) == 2 for v in both.values()) < len(both)
    first = outcome.checked[0].to_json()
    message = outcome.message
    assert "\n" not in message and message.startswith("regression gate failed: run_date 2026-11-21 -> 2026-11-22")
    assert f"NDCG@10 of segment=a: {first['users_in_common']} users in common" in message
    assert f"difference {first['mean_difference']:+.6f}, 95% interval [{first['difference_ci_low']:+.6f}, " in message
    assert message.endswith("; 1 more gate(s) failed, see summary.json (outputs were written)")
    # The second night ran the same model on fewer users: nothing changed, the gate passes.
    same = evaluate_command.drop_gate(
        spark,
        directory_runs.DirectoryRuns(output_files.files_for(spark, output)),
        NIGHTS[1],
        nights[1][2].per_user,
        gates,
        ["segment"],
        "user_id",
    )
    assert not same.failed and same.previous == NIGHTS[0]
    assert same.message.startswith("regression gate passed: run_date 2026-11-20 -> 2026-11-21")
    assert [g.mean_difference for g in same.checked] == [0.0, 0.0]


def test_regression_gate_without_an_earlier_run_passes_and_says_so(spark, nightly):
    output, nights = nightly
    gates = parse_gates("drop", "10:0.02")
    outcome = evaluate_command.drop_gate(
        spark,
        directory_runs.DirectoryRuns(output_files.files_for(spark, output)),
        NIGHTS[0],
        nights[0][2].per_user,
        gates,
        ["segment"],
        "user_id",
    )
    assert outcome.previous is None and not outcome.failed and outcome.checked == ()
    assert outcome.message == f"regression gate: no complete run before run_date={NIGHTS[0]} in {output}; passed"
    assert outcome.to_json()["previous"] is None


def change(mean_previous, difference, low, high, users=100, segment="a", k=10):
    return {
        "segment": segment,
        "k": k,
        "users_in_common": users,
        "mean_previous": mean_previous,
        "mean_current": mean_previous + difference,
        "mean_difference": difference,
        "difference_ci_low": low,
        "difference_ci_high": high,
    }


@pytest.mark.parametrize(
    "gate, row, point_estimate, passed",
    [
        (Gate("drop", (), 10, 0.02), change(0.5, -0.03, -0.05, -0.01), False, False),  # a sure drop past 0.02
        (Gate("drop", (), 10, 0.02), change(0.5, -0.03, -0.07, 0.01), False, True),  # the interval holds 0
        (Gate("drop", (), 10, 0.02), change(0.5, -0.03, -0.07, 0.01), True, False),  # ... unless on the estimate
        (Gate("drop", (), 10, 0.02), change(0.5, -0.01, -0.015, -0.005), False, True),  # sure, but within 0.02
        (Gate("drop", (), 10, 0.02, True), change(0.5, -0.011, -0.02, -0.002), False, False),  # 2% of 0.5 is 0.01
        (Gate("drop", (), 10, 0.02, True), change(0.5, -0.009, -0.02, -0.002), False, True),
        (Gate("drop", (), 10, 0.02), change(0.5, -0.5, None, None, users=1), False, True),  # no interval of 1 user
        (Gate("drop", (("segment", "b"),), 10, 0.02), change(0.5, 0.0, 0.0, 0.0), False, False),  # selects nothing
        (Gate("drop", (), 5, 0.02), change(0.5, 0.0, 0.0, 0.0), False, False),  # no k=5 row
    ],
)
def test_drop_decision(gate, row, point_estimate, passed):
    checked = check([gate], [row], ["segment"], point_estimate=point_estimate)
    assert [g.passed for g in checked] == [passed]


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("10:0.02", [Gate("drop", (), 10, 0.02)]),
        (
            "segment=a:10:2%, all:0.5%",
            [Gate("drop", (("segment", "a"),), 10, 0.02, True), Gate("drop", (), None, 0.005, True)],
        ),
        (["5:0.1", "10:0"], [Gate("drop", (), 5, 0.1), Gate("drop", (), 10, 0.0)]),
        ("", []),
    ],
)
def test_drop_gate_spelling(spec, expected):
    gates = parse_gates("drop", spec, ["segment"], [5, 10, None])
    assert list(gates) == expected
    assert [parse_gates("drop", g.describe(), ["segment"])[0] for g in gates] == expected


@pytest.mark.parametrize(
    "spec, message",
    [
        ("10", "expected [column=value:]k:drop"),
        ("10:x", "expected [column=value:]k:drop"),
        ("10:-0.1", "expected [column=value:]k:drop"),
        ("10:150%", "expected [column=value:]k:drop"),
        ("0:0.1", "expected [column=value:]k:drop"),
        ("20:0.1", "names k = 20, which is not among the cutoffs computed"),
        ("country=kr:10:0.1", "country is not a column to filter on (segment)"),
        ("segment:10:0.1", "must look like column=value"),
    ],
)
def test_drop_gate_bad_spelling_is_one_line(spec, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        parse_gates("drop", spec, ["segment"], [5, 10])
    assert "\n" not in str(caught.value)


def test_trend_chart_draws_each_segment_and_k_across_the_runs(spark, nightly):
    output, nights = nightly
    # Tonight's figures stand in for a run of the same date; the chart keeps the last 2 runs.
    tonight = [dict(m, mean_ndcg=0.5) for m in nights[2][1]["metrics"]]
    rows = history.trend_rows(
        directory_runs.read_history(output_files.files_for(spark, output)), (NIGHTS[2], tonight), last=2
    )
    assert sorted({r["run_date"] for r in rows}) == list(NIGHTS[1:])
    assert [r["mean_ndcg"] for r in rows if r["run_date"] == NIGHTS[2]] == [0.5] * 4
    svg = ET.fromstring(trend_chart(rows, ["segment"]))
    lines = svg.findall(f"{SVG}polyline")
    bands = svg.findall(f"{SVG}polygon")
    assert len(lines) == len(bands) == 4  # segments a, b at k 5, 10
    legend = [t.find(f"{SVG}title").text for t in svg.findall(f"{SVG}text") if t.get("class") == "legend"]
    assert legend == ["segment=a, NDCG@5", "segment=a, NDCG@10", "segment=b, NDCG@5", "segment=b, NDCG@10"]
    # Each line's points: x by run (two runs: the plot's two ends), y by mean on the axis' scale.
    y_top = float([t for t in svg.findall(f"{SVG}text") if t.get("x") == "44"][-1].text)  # the y axis labels
    for line, name in zip(lines, legend):
        segment, k = name[len("segment=") :].split(", NDCG@")
        means = [
            r["mean_ndcg"]
            for r in sorted(rows, key=lambda r: r["run_date"])
            if (r["segment"], r["k"]) == (segment, int(k))
        ]
        points = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
        assert [x for x, _ in points] == [50.0, 540.0]
        assert [y for _, y in points] == pytest.approx([20 + 260 - 260 * m / y_top for m in means], abs=0.06)
    # The band runs along the interval: the upper ends, then the lower ends back.
    first = sorted((r for r in rows if (r["segment"], r["k"]) == ("a", 5)), key=lambda r: r["run_date"])
    edge = [tuple(map(float, p.split(","))) for p in bands[0].get("points").split()]
    expected = [r["ndcg_ci_high"] for r in first] + [r["ndcg_ci_low"] for r in reversed(first)]
    assert [y for _, y in edge] == pytest.approx([280 - 260 * v / y_top for v in expected], abs=0.06)
    assert "no complete run" in trend_chart([], ["segment"])


@browser
def test_trend_chart_renders_in_headless_chromium_with_its_labels_inside(spark, nightly, tmp_path):
    output, _ = nightly
    runs = directory_runs.read_history(output_files.files_for(spark, output))
    # Fourteen runs with a long segment name: the dates are thinned, the names cut to fit.
    many = [(f"2026-12-{d:02d}", manifest) for d in range(1, 15) for _, manifest in runs[:1]]
    rows = [dict(r, segment=r["segment"] * 40) for r in history.trend_rows(many, last=14)]
    page = "<!DOCTYPE html><html><body>" + trend_chart(rows, ["segment"]) + "</body></html>"
    overflow, lines = texts_outside_svgs(page, tmp_path, "polyline.trend")
    assert lines == 4 and overflow == []


def test_the_gate_can_compare_with_the_last_run_that_passed(spark, tmp_path):
    output = str(tmp_path / "out")
    now = per_user_frame(spark, [("a", u, 10, 0.5) for u in range(10)])
    # Night 1 good (0.9), night 2 bad (0.5, its drop gate failed), tonight as bad as night 2.
    for date, value, passed in (("2026-11-01", 0.9, True), ("2026-11-02", 0.5, False)):
        manifest = {"metrics": [], "quality_gates": [], "regression_gate": {"gates": [{"passed": passed}]}}
        write_run(spark, output, date, per_user_frame(spark, [("a", u, 10, value) for u in range(10)]), manifest)
    gates = parse_gates("drop", "10:0.02")
    last = evaluate_command.drop_gate(
        spark,
        directory_runs.DirectoryRuns(output_files.files_for(spark, output)),
        "2026-11-03",
        now,
        gates,
        ["segment"],
        "user_id",
    )
    assert (last.previous, last.failed) == ("2026-11-02", False)
    good = evaluate_command.drop_gate(
        spark,
        directory_runs.DirectoryRuns(output_files.files_for(spark, output)),
        "2026-11-03",
        now,
        gates,
        ["segment"],
        "user_id",
        passed_only=True,
    )
    assert (good.previous, good.failed) == ("2026-11-01", True)
    assert good.checked[0].mean_difference == pytest.approx(-0.4, abs=1e-12)
    assert good.checked[0].difference_ci_low == good.checked[0].difference_ci_high == pytest.approx(-0.4)
    assert (
        directory_runs.gates_passed(RunResult.from_json({"quality_gates": [{"passed": True}, {"passed": False}]}))
        is False
    )
    assert directory_runs.gates_passed(RunResult.from_json({"metrics": []})) is True
    none = evaluate_command.drop_gate(
        spark,
        directory_runs.DirectoryRuns(output_files.files_for(spark, output)),
        "2026-11-01",
        now,
        gates,
        ["segment"],
        "user_id",
        passed_only=True,
    )
    assert none.message.startswith("regression gate: no passing run before run_date=2026-11-01")
