"""Segments: each model's figures are a separate run of that model; users without attributes are
counted; gates, the finished line and compare follow the segments."""

from __future__ import annotations

import json

import pytest
from chispa import assert_approx_df_equality, assert_df_equality
from pyspark.sql import functions as F

from ndcg_spark import evaluate
from ndcg_spark.compare import compare
from ndcg_spark.job import run
from ndcg_spark.job.exits import EXIT_OK, EXIT_QUALITY_GATE

RECS = "model string, user_id int, item_id string, score double"
REL = "user_id int, item_id string, relevance double"
ATTRS = "user_id int, country string"


@pytest.fixture(scope="module")
def served(spark):
    """Models that serve different users. Judged users 1-6; a serves 1, 2, 3 and 9 (9 has no
    judgements); b serves 2, 4 and 5; c serves only 6. Judged user 6 is served by c alone, so
    a and b must score it as a user without recommendations, not drop it."""
    recs = spark.createDataFrame(
        [
            ("a", 1, "x", 0.9), ("a", 1, "y", 0.8), ("a", 1, "z", 0.7),
            ("a", 2, "y", 0.9), ("a", 2, "x", 0.9),
            ("a", 3, "q", 0.5),
            ("a", 9, "x", 0.5),
            ("b", 2, "x", 0.9), ("b", 2, "z", 0.1),
            ("b", 4, "x", 0.9), ("b", 4, "x", 0.3), ("b", 4, "z", 0.2),
            ("b", 5, "y", 0.4),
            ("c", 6, "y", 0.9), ("c", 6, "x", 0.8),
        ],
        RECS,
    )  # fmt: skip
    rel = spark.createDataFrame(
        [
            (1, "y", 3.0), (1, "z", 1.0),
            (2, "x", 2.0), (2, "y", 2.0),
            (3, "q", 0.0),
            (4, "x", 1.0), (4, "z", 4.0),
            (5, "w", 2.0),
            (6, "y", 1.0),
        ],
        REL,
    )  # fmt: skip
    # User 5 has no attribute row; user 9 (not judged) has one with a null country.
    attributes = spark.createDataFrame([(1, "kr"), (2, "kr"), (3, "cn"), (4, "cn"), (6, "kr"), (9, None)], ATTRS)
    return recs, rel, attributes


def _model(recs, name):
    return recs.filter(F.col("model") == name).drop("model")


def _sorted(df, *keys):
    return df.orderBy(*[F.col(c).asc_nulls_last() for c in keys])


def _each_model_alone(recs, rel, **options):
    """Separate runs of each model, with the model as a column again: what the segments must be."""
    runs = [evaluate(_model(recs, m), rel, **options) for m in ("a", "b", "c")]
    per_user = [r.per_user.select(F.lit(m).alias("model"), "*") for m, r in zip("abc", runs)]
    summary = [r.summary.select(F.lit(m).alias("model"), "*") for m, r in zip("abc", runs)]
    return per_user[0].unionAll(per_user[1]).unionAll(per_user[2]), summary[0].unionAll(summary[1]).unionAll(summary[2])


@pytest.mark.parametrize(
    "options",
    [
        dict(k=[1, 2, None], companion_metrics=True),
        dict(k=[1, 3], no_recommendations="exclude", confidence_interval="bootstrap", bootstrap_samples=50, seed=3),
    ],
)
def test_each_model_is_a_separate_run_of_that_model(spark, served, options):
    recs, rel, _ = served
    both = evaluate(recs, rel, group_by=["model"], **options)
    both_per_user = both.per_user.localCheckpoint()  # read twice below
    per_user, summary = _each_model_alone(recs, rel, **options)
    keys = ("model", "user_id", "k")
    assert_df_equality(_sorted(both_per_user, *keys), _sorted(per_user, *keys), ignore_nullable=True)
    # No segment the recommendations do not hold (no null model for unserved judged users).
    assert_approx_df_equality(both.summary, _sorted(summary, "model", "k"), precision=1e-12, ignore_nullable=True)
    if options.get("no_recommendations") != "exclude":
        # Judged user 6, served by c only, is in a and b with NDCG 0 and no recommendations.
        rows = [r for r in both_per_user.filter(F.col("user_id") == 6).collect() if r.k == options["k"][-1]]
        assert {(r.model, r.ndcg, r.n_recommended) for r in rows} == {("a", 0.0, 0), ("b", 0.0, 0), ("c", 1.0, 2)}


def test_the_row_accounting_counts_each_judgement_once(spark, served):
    recs, rel, _ = served
    sums = evaluate(recs, rel, k=[2], group_by=["model"], no_recommendations="exclude").row_accounting()
    # 15 recommendation rows: 2 past k=2 (a/1/z, b/4/z), 1 repeat (b/4/x); 6 judged users x 3 models + user 9.
    recommendations = ("recommendations_used", "recommendations_beyond_k", "recommendations_repeated")
    assert tuple(sums[c] for c in recommendations) == (12, 2, 1)
    assert (sums["relevance_used"], sums["relevance_excluded"]) == (9, 0)
    assert (sums["users"], sums["users_excluded"]) == (19, 19 - 8)


def test_a_user_without_an_attribute_row_is_counted_in_the_null_segment(spark, served):
    recs, rel, attributes = served
    a = _model(recs, "a")
    result = evaluate(a, rel, k=[2], group_by=["country"], user_attributes=attributes)
    alone = evaluate(a, rel, k=[2]).per_user.localCheckpoint()  # read twice below
    # Every user of the plain run is in the segmented one, with its attribute or null.
    expected = alone.join(attributes, "user_id", "left").select("country", *alone.columns)
    assert_df_equality(_sorted(result.per_user, "country", "user_id"), _sorted(expected, "country", "user_id"))
    summary = {r.country: r.asDict() for r in result.summary.collect()}
    assert set(summary) == {"kr", "cn", None}
    # The null segment holds user 5 (no attribute row) and user 9 (a row with a null country).
    assert (summary[None]["users"], summary[None]["users_without_attributes"]) == (2, 1)
    assert summary["kr"]["users_without_attributes"] == summary["cn"]["users_without_attributes"] == 0
    assert sum(s["users"] for s in summary.values()) == alone.count()


def test_model_and_country_together(spark, served):
    recs, rel, attributes = served
    both = evaluate(recs, rel, k=[1, 2], group_by=["model", "country"], user_attributes=attributes)
    per_user, summary = _each_model_alone(recs, rel, k=[1, 2], group_by=["country"], user_attributes=attributes)
    keys = ("model", "country", "user_id", "k")
    assert_df_equality(_sorted(both.per_user, *keys), _sorted(per_user, *keys), ignore_nullable=True)
    assert_approx_df_equality(
        both.summary, _sorted(summary, "model", "country", "k"), precision=1e-12, ignore_nullable=True
    )


def test_compare_agrees_with_group_by(spark, served):
    recs, rel, attributes = served
    judged_only = recs.filter(F.col("user_id") != 9)  # a user without judgements is not in a separate run of b
    a, b = _model(judged_only, "a"), _model(judged_only, "b")
    grouped = evaluate(judged_only.filter(F.col("model") != "c"), rel, k=[1, 2], group_by=["model"])
    means = {(r.model, r.k): r for r in grouped.summary.collect()}
    for row in compare(a, b, rel, k=[1, 2]).report():
        assert row["pairs"] == means[("a", row["k"])].users == means[("b", row["k"])].users == 6
        assert row["mean_ndcg_baseline"] == pytest.approx(means[("a", row["k"])].mean_ndcg, abs=1e-12)
        assert row["mean_ndcg_candidate"] == pytest.approx(means[("b", row["k"])].mean_ndcg, abs=1e-12)
    by_country = evaluate(a, rel, k=[2], group_by=["country"], user_attributes=attributes).summary
    paired = compare(a, b, rel, k=[2], group_by=["country"], user_attributes=attributes).report()
    assert {r["country"]: r["mean_ndcg_baseline"] for r in paired} == pytest.approx(
        {r.country: r.mean_ndcg for r in by_country.collect()}, abs=1e-12
    )


# ----------------------------------------------------------------------------- the job


@pytest.fixture(scope="module")
def served_paths(served, tmp_path_factory):
    recs, rel, attributes = served
    base = tmp_path_factory.mktemp("served")
    for name, df in (("recs", recs), ("rel", rel), ("attrs", attributes)):
        df.coalesce(1).write.parquet(str(base / name))
    return base


def _job(base, out, *flags):
    return run(
        ["--recommendations", str(base / "recs"), "--relevance", str(base / "rel"), "--output", str(out), *flags]
    )


def _finished(stdout):
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith('{"event"')]
    assert len(lines) == 1
    return lines[0]


@pytest.fixture(scope="module")
def by_model(spark, served_paths):
    """The library's evaluation of the job's input files by model at k = 2, its frames kept: the
    oracle of the job's segmented figures below."""
    tables = [spark.read.parquet(str(served_paths / n)) for n in ("recs", "rel")]
    result = evaluate(*tables, k=[2], group_by=["model"])
    return result.per_user.localCheckpoint(), result.summary.localCheckpoint()


@pytest.mark.job
def test_gates_hold_every_segment_and_name_the_one_below(spark, served_paths, by_model, tmp_path, capsys):
    base = served_paths
    summary = {(r.model, r.k): r.mean_ndcg for r in by_model[1].collect()}
    low = min(summary.values())
    # Every segment clears a threshold just under the lowest mean: exit 0.
    assert _job(base, tmp_path / "ok", "--k", "2", "--group-by", "model", "--fail-below", f"2:{low - 1e-9:.12f}") == 0
    line = _finished(capsys.readouterr().out)
    assert line["status"] == "ok"
    assert {(f["segment"]["model"], f["k"]): f["mean_ndcg"] for f in line["figures"]} == pytest.approx(
        {(m, str(k)): v for (m, k), v in summary.items()}
    )
    assert {f["segment"]["model"]: f["users"] for f in line["figures"]} == {"a": 7, "b": 6, "c": 6}
    # Just above it: the lowest segment fails, and the message names it.
    worst = min(summary, key=summary.get)[0]
    code = _job(base, tmp_path / "low", "--k", "2", "--group-by", "model", "--fail-below", f"2:{low + 1e-9:.12f}")
    captured = capsys.readouterr()
    assert code == EXIT_QUALITY_GATE
    assert _finished(captured.out)["status"] == "quality_gate_failed"
    message = captured.err.strip()
    assert message.count("\n") == 0 and f"model={worst}" in message and "NDCG@2" in message, message
    assert f"{low:.6f}" in message
    gates = json.loads((tmp_path / "low" / "summary.json").read_text())["quality_gates"]
    assert {(g["segment"]["model"], g["passed"]) for g in gates} == {(m, m != worst) for m in ("a", "b", "c")}


@pytest.mark.job
def test_a_gate_with_a_segment_filter(spark, served_paths, tmp_path, capsys):
    base = served_paths
    flags = ["--k", "1,2", "--group-by", "model"]
    # At k=2 a's mean is 0.217, b's 0.138 and c's 0.167: a gate on a alone passes at 0.2 (one on
    # every segment fails below the lowest mean: test_gates_hold_every_segment_and_name_the_one_below).
    assert _job(base, tmp_path / "a", *flags, "--fail-below", "model=a:2:0.2") == EXIT_OK
    gates = json.loads((tmp_path / "a" / "summary.json").read_text())["quality_gates"]
    assert [(g["segment"], g["k"], g["passed"]) for g in gates] == [({"model": "a"}, 2, True)]
    capsys.readouterr()
    assert _job(base, tmp_path / "none", *flags, "--fail-below", "model=zz:2:0.1") == EXIT_QUALITY_GATE
    assert "no segment model=zz" in capsys.readouterr().err
    assert _job(base, tmp_path / "bad", *flags, "--fail-below", "country=kr:2:0.1") == 2
    assert "country is not a group_by column" in capsys.readouterr().err


@pytest.mark.job
def test_the_job_with_attributes_and_the_compare_finished_line(spark, served_paths, by_model, tmp_path, capsys):
    base = served_paths
    code = _job(base, tmp_path / "attrs", "--k", "2", "--group-by", "country", "--user-attributes", str(base / "attrs"))
    assert code == EXIT_OK
    line = _finished(capsys.readouterr().out)
    metrics = json.loads((tmp_path / "attrs" / "summary.json").read_text())["metrics"]
    assert {m["country"]: m["users_without_attributes"] for m in metrics} == {None: 1, "cn": 0, "kr": 0}
    assert {f["segment"]["country"] for f in line["figures"]} == {None, "cn", "kr"}
    flags = ["--model-col", "model", "--baseline-model", "a", "--candidate-model", "b"]
    assert run(["compare", *flags, "--recommendations", str(base / "recs"), "--relevance", str(base / "rel"),
                "--output", str(tmp_path / "cmp"), "--k", "2"]) == EXIT_OK  # fmt: skip
    line = _finished(capsys.readouterr().out)
    assert line["event"] == "ndcg_spark.finished" and line["command"] == "compare" and line["status"] == "ok"
    # Each model's per-user NDCG, paired here: a user one model did not score has 0.0 on its side.
    ndcg = {"a": {}, "b": {}}
    for r in by_model[0].filter("model IN ('a', 'b')").collect():
        ndcg[r.model][r.user_id] = r.ndcg
    users = set(ndcg["a"]) | set(ndcg["b"])
    differences = [ndcg["b"].get(u, 0.0) - ndcg["a"].get(u, 0.0) for u in users]
    [figure] = line["figures"]
    assert (figure["k"], figure["pairs"]) == ("2", len(users))
    assert figure["mean_difference"] == pytest.approx(sum(differences) / len(differences), abs=1e-12)
