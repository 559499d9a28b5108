"""Bad input never produces a number: each case through the library and through the command line."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from chispa import assert_df_equality
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from ndcg_spark import InputDataError, compare, evaluate
from ndcg_spark.errors import input_errors
from ndcg_spark.job import run
from ndcg_spark.job.exits import EXIT_CONFIG, EXIT_INPUT, EXIT_OK
from ndcg_spark.validation import validate

GOOD_RECS = [(1, "a", 0.9), (1, "b", 0.8), (2, "a", 0.7), (2, "c", 0.6)]
GOOD_REL = [(1, "a", 2.0), (1, "c", 1.0), (2, "c", 3.0)]
RECS_SCHEMA = "user_id int, item_id string, score double"
REL_SCHEMA = "user_id int, item_id string, relevance double"


def _tables(spark, recs_rows=None, rel_rows=None, recs_schema=RECS_SCHEMA, rel_schema=REL_SCHEMA):
    recs = spark.createDataFrame(GOOD_RECS if recs_rows is None else recs_rows, recs_schema)
    rel = spark.createDataFrame(GOOD_REL if rel_rows is None else rel_rows, rel_schema)
    return recs, rel


def _run_cli(spark, tmp_path, recs, rel, *flags):
    recs_path, rel_path = str(tmp_path / "recs"), str(tmp_path / "rel")
    recs.write.mode("overwrite").parquet(recs_path)
    rel.write.mode("overwrite").parquet(rel_path)
    out = tmp_path / "out"
    code = run(["--recommendations", recs_path, "--relevance", rel_path, "--output", str(out), *flags])
    return code, out


# Each case: recommendations rows + schema, relevance rows + schema, options, words of the message.
ROW_CASES = {
    "null user": dict(
        recs=GOOD_RECS + [(None, "z", 0.5)],
        words="recommendations column 'user_id' is null in 1 row, e.g. user_id=null/item_id=z",
    ),
    "null item": dict(
        rel=GOOD_REL + [(2, None, 1.0)],
        words="relevance column 'item_id' is null in 1 row, e.g. user_id=2/item_id=null",
    ),
    "null score": dict(
        recs=GOOD_RECS + [(3, "q", None), (4, "q", None)],
        words="recommendations column 'score' is null in 2 rows, e.g. user_id=3/item_id=q, user_id=4/item_id=q",
    ),
    "null relevance": dict(rel=GOOD_REL + [(2, "d", None)], words="relevance column 'relevance' is null in 1 row"),
    "NaN score": dict(
        recs=GOOD_RECS + [(3, "q", float("nan"))],
        words="recommendations column 'score' is NaN or infinite in 1 row, e.g. user_id=3/item_id=q",
    ),
    "infinite relevance": dict(
        rel=GOOD_REL + [(2, "d", float("inf"))], words="relevance column 'relevance' is NaN or infinite in 1 row"
    ),
    "negative relevance": dict(
        rel=GOOD_REL + [(2, "d", -1.0)],
        words="relevance column 'relevance' is negative (set negative_relevance = \"clip\" to read it as 0) in 1 row",
    ),
    "exponential overflow": dict(
        rel=GOOD_REL + [(2, "d", 2000.0)],
        options={"gain": "exponential"},
        words="is 1024 or more, so 2^rel - 1 overflows a double under exponential gain in 1 row",
    ),
    "duplicate relevance": dict(
        rel=GOOD_REL + [(1, "a", 1.0)], words="relevance key (user_id, item_id) appears more than once"
    ),
    "rank not positive": dict(
        recs=[(1, "a", 1), (1, "b", 0)],
        recs_schema="user_id int, item_id string, rank int",
        options={"rank_col": "rank"},
        words="recommendations column 'rank' is not a positive integer in 1 row, e.g. user_id=1/item_id=b",
    ),
    "rank not integer": dict(
        recs=[(1, "a", 1.0), (1, "b", 1.5)],
        recs_schema="user_id int, item_id string, rank double",
        options={"rank_col": "rank"},
        words="recommendations column 'rank' is not a positive integer in 1 row",
    ),
    "rank tie": dict(
        recs=[(1, "a", 1), (1, "b", 1), (2, "a", 1)],
        recs_schema="user_id int, item_id string, rank int",
        options={"rank_col": "rank"},
        words="recommendations column 'rank' has two items at the same rank for one user",
    ),
}


def _flags(options):
    flags = []
    for key, value in (options or {}).items():
        flags += ["--" + key.replace("_", "-"), str(value)]
    return flags


@pytest.mark.parametrize("case", list(ROW_CASES), ids=list(ROW_CASES))
def test_row_problems_stop_the_library(spark, case):
    spec = ROW_CASES[case]
    recs, rel = _tables(spark, spec.get("recs"), spec.get("rel"), spec.get("recs_schema", RECS_SCHEMA))
    options = spec.get("options", {})
    # validate(): count and examples.
    with pytest.raises(InputDataError) as info:
        validate(recs, rel, **options)
    assert spec["words"] in str(info.value)
    # evaluate() alone: the guard fails the run when the figures are computed.
    words = spec["words"].split(" in 1 row")[0].split(" in 2 rows")[0]
    with pytest.raises((PySparkException, Py4JJavaError)) as info:
        evaluate(recs, rel, k=[2], **options).summary.collect()
    assert words in str(info.value)


def test_validate_names_every_problem_of_both_tables_at_once(spark):
    # Two problems in the recommendations (a null score and a NaN score) and one in the relevance:
    # one call names all three, in rule order, each with its own count and examples.
    recs, rel = _tables(
        spark,
        GOOD_RECS + [(3, "q", None), (4, "r", float("nan")), (5, "s", float("nan"))],
        GOOD_REL + [(2, "d", -1.0)],
    )
    with pytest.raises(InputDataError) as info:
        validate(recs, rel)
    problems = str(info.value).split("; ")
    assert problems == [
        "recommendations column 'score' is null in 1 row, e.g. user_id=3/item_id=q",
        "recommendations column 'score' is NaN or infinite in 2 rows, e.g. user_id=4/item_id=r, user_id=5/item_id=s",
        "relevance column 'relevance' is negative (set negative_relevance = \"clip\" to read it as 0) in 1 row, "
        "e.g. user_id=2/item_id=d",
    ]
    assert info.value.condition == "INVALID_INPUT.INVALID_ROWS"
    assert info.value.parameters == {"problems": problems}
    reports = info.value.reports
    assert (reports["recommendations"].rows, reports["recommendations"].problems) == (
        7,
        {"null_score": 1, "bad_score": 2},
    )
    assert (reports["relevance"].rows, reports["relevance"].problems) == (4, {"negative_relevance": 1})


def test_a_rank_tie_across_the_cut_stops_the_run(spark):
    # Ranks 1, 2, 2: at k = 2 one rank-2 item is in and one out, which the tie-break alone would
    # decide; at k = 1 both tied items are past the cut and past the one row looked beyond it.
    recs = spark.createDataFrame([(1, "a", 1), (1, "b", 2), (1, "c", 2)], "user_id int, item_id string, rank int")
    rel = spark.createDataFrame([(1, "c", 1.0)], REL_SCHEMA)
    for k in (2, 3):
        with pytest.raises((PySparkException, Py4JJavaError)) as info:
            evaluate(recs, rel, k=[k], rank_col="rank").per_user.collect()
        assert "recommendations column 'rank' has two items at the same rank for one user, e.g. user_id=1" in str(
            info.value
        )
    expected = spark.createDataFrame(
        [(1, 1, 0.0, 0.0, 1.0, 0.0, 1, 1)],
        "user_id int, k int, cg double, dcg double, idcg double, ndcg double, n_recommended int, n_relevant int",
    )
    assert_df_equality(evaluate(recs, rel, k=[1], rank_col="rank").per_user, expected, ignore_nullable=True)


# "null score" and "duplicate relevance" go through the command line in
# test_bad_input_leaves_the_previous_output_as_it_was (the same exit code and line, an output there),
# "negative relevance" in test_a_bad_row_met_by_the_library_or_the_callers_action_is_an_input_data_error.
@pytest.mark.job
@pytest.mark.parametrize("case", ["rank tie"])
def test_row_problems_through_the_command_line(spark, tmp_path, capsys, case):
    spec = ROW_CASES[case]
    recs, rel = _tables(spark, spec.get("recs"), spec.get("rel"), spec.get("recs_schema", RECS_SCHEMA))
    code, out = _run_cli(spark, tmp_path, recs, rel, *_flags(spec.get("options")))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_INPUT
    assert len(err) == 1 and spec["words"] in err[0]
    assert not out.exists()


@pytest.fixture(scope="module")
def good_output(spark, tmp_path_factory):
    """One good run's output, made once for the cases that must leave it as it was."""
    base = tmp_path_factory.mktemp("good")
    code, out = _run_cli(spark, base, *_tables(spark))
    assert code == EXIT_OK
    return out


@pytest.mark.job
@pytest.mark.parametrize("case", ["null score", "duplicate relevance"])
def test_bad_input_leaves_the_previous_output_as_it_was(spark, tmp_path, capsys, case, good_output):
    """The job reads its input once when it is fine: the figures are computed before anything is
    written, so a bad row found while computing them stops the run with the full message and the
    previous output untouched."""
    shutil.copytree(good_output, tmp_path / "out")
    out = tmp_path / "out"
    before = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert any(str(p).startswith("per_user") for p in before) and (out / "summary.json").exists()
    spec = ROW_CASES[case]
    bad_recs, bad_rel = _tables(spark, spec.get("recs"), spec.get("rel"))
    capsys.readouterr()
    code, out = _run_cli(spark, tmp_path, bad_recs, bad_rel)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_INPUT and len(err) == 1 and spec["words"] in err[0]
    after = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert after == before


@pytest.mark.job
@pytest.mark.parametrize(
    "recs_schema, rel_schema, words",
    [
        (
            "user_id int, item_id string, scor double",
            REL_SCHEMA,
            "recommendations table has no column 'score' (it has: user_id, item_id, scor); did you mean 'scor'? "
            "(set score_col, flag --score-col, to the column's name)",
        ),
        (
            RECS_SCHEMA,
            "user_id int, item_id string, relevanse double",
            "relevance table has no column 'relevance' (it has: user_id, item_id, relevanse); did you mean 'relevanse'? "
            "(set relevance_col, flag --relevance-col, to the column's name)",
        ),
        (
            "user_id int, item_id string, score string",
            REL_SCHEMA,
            "recommendations column 'score' has type string; accepted types: tinyint, smallint, int, bigint, float, double or decimal",
        ),
        (RECS_SCHEMA, "user_id int, item_id string, relevance string", "relevance column 'relevance' has type string"),
        (
            "user_id double, item_id string, score double",
            REL_SCHEMA,
            "recommendations column 'user_id' has type double; accepted types: tinyint, smallint, int, bigint or string",
        ),
        (
            "user_id string, item_id string, score double",
            REL_SCHEMA,
            "column 'user_id' is string in the recommendations but int in the relevance table",
        ),
    ],
)
def test_schema_problems(spark, tmp_path, capsys, recs_schema, rel_schema, words):
    cast = {"string": str, "double": float, "int": int}
    recs_types = [t.split()[-1] for t in recs_schema.split(",")]
    rel_types = [t.split()[-1] for t in rel_schema.split(",")]
    recs_rows = [tuple(cast[t](v) for t, v in zip(recs_types, r)) for r in GOOD_RECS]
    rel_rows = [tuple(cast[t](v) for t, v in zip(rel_types, r)) for r in GOOD_REL]
    recs, rel = _tables(spark, recs_rows, rel_rows, recs_schema, rel_schema)
    with pytest.raises(InputDataError) as info:
        evaluate(recs, rel)
    assert words in str(info.value)
    code, out = _run_cli(spark, tmp_path, recs, rel)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_INPUT and len(err) == 1 and words in err[0]
    assert not out.exists()


@pytest.mark.job
@pytest.mark.parametrize("table", ["recommendations", "relevance"])
def test_empty_table(spark, tmp_path, capsys, table):
    recs, rel = _tables(spark, [] if table == "recommendations" else None, [] if table == "relevance" else None)
    with pytest.raises(InputDataError, match=f"{table} table is empty"):
        validate(recs, rel)
    code, out = _run_cli(spark, tmp_path, recs, rel)
    assert code == EXIT_INPUT and f"{table} table is empty" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.job
def test_unreadable_format(spark, tmp_path, capsys):
    csv = tmp_path / "recs.csv"
    csv.write_text("user_id,item_id,score\n1,a,0.5\n")
    code = run(["--recommendations", str(csv), "--relevance", str(csv), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_INPUT and len(err) == 1
    assert "cannot read recommendations" in err[0] and "as parquet" in err[0]


@pytest.mark.job
def test_unknown_catalog_table(tmp_path, capsys):
    code = run(["--recommendations", "no_such_table", "--relevance", "nor_this", "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_INPUT and "cannot read recommendations 'no_such_table' as a table" in err[0]


@pytest.mark.job
def test_output_holding_other_data_is_refused(spark, tmp_path, capsys, good_output):
    recs, rel = _tables(spark)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "important.csv").write_text("keep me")
    code, out = _run_cli(spark, tmp_path, recs, rel)
    assert code == EXIT_CONFIG
    assert "already holds other data (important.csv)" in capsys.readouterr().err
    assert (out / "important.csv").read_text() == "keep me"
    # A previous ndcg-spark output (the good run's, made by the same command) is replaced.
    shutil.rmtree(out)
    shutil.copytree(good_output, out)
    assert _run_cli(spark, tmp_path, recs, rel, "--k", "1")[0] == EXIT_OK
    assert json.loads((out / "summary.json").read_text())["settings"]["k"] == [1]


def test_negative_relevance_clipped_to_zero(spark):
    recs, rel = _tables(spark, rel_rows=GOOD_REL + [(2, "a", -2.0)])
    clipped = evaluate(recs, rel, k=[2], negative_relevance="clip").per_user.orderBy("user_id")
    zero = evaluate(*_tables(spark, rel_rows=GOOD_REL + [(2, "a", 0.0)]), k=[2]).per_user.orderBy("user_id")
    assert_df_equality(clipped, zero)


@pytest.mark.job
def test_awkward_column_names_through_the_command_line(spark, tmp_path):
    recs = spark.createDataFrame(GOOD_RECS, "`user id` int, `a.b` string, `s``core` double")
    rel = spark.createDataFrame(GOOD_REL, "`user id` int, `a.b` string, relevance double")
    code, out = _run_cli(
        spark, tmp_path, recs, rel, "--user-col", "user id", "--item-col", "a.b", "--score-col", "s`core", "--k", "2"
    )
    assert code == EXIT_OK
    assert spark.read.parquet(str(out / "per_user")).columns[0] == "user id"


def test_awkward_column_names_in_the_messages(spark):
    # The plan is SQL text: quotes, backslashes and backticks in names must reach the message intact.
    score, item = "it's \\ `s`", "item 'id'"
    recs = spark.createDataFrame(
        [(1, "a", 0.9), (1, "b", None)],
        f"user_id int, `{item.replace('`', '``')}` string, `{score.replace('`', '``')}` double",
    )
    rel = spark.createDataFrame([(1, "a", 1.0)], f"user_id int, `{item}` string, relevance double")
    with pytest.raises((PySparkException, Py4JJavaError)) as info:
        evaluate(recs, rel, k=[2], item_col=item, score_col=score).summary.collect()
    assert f"recommendations column {score!r} is null, e.g. user_id=1/{item}=b" in str(info.value)


# ----------------------------------------------------------------------------- quarantine


def _inject(rng, rows, bad_rows, n):
    picks = [bad_rows[i] for i in rng.integers(0, len(bad_rows), size=n)]
    mixed = rows + picks
    order = rng.permutation(len(mixed))
    return [mixed[i] for i in order]


@pytest.mark.job
def test_quarantine_equals_clean_rows_alone_and_accounting_adds_up(spark, tmp_path):
    rng = np.random.default_rng(42)
    clean_recs = [
        (u, f"i{i}", float(s))
        for u in range(30)
        for i, s in zip(rng.choice(40, 12, replace=False), rng.permutation(12))
    ]
    clean_rel = [(u, f"i{i}", float(rng.integers(0, 5))) for u in range(30) for i in rng.choice(40, 8, replace=False)]
    bad_recs = [(None, "i1", 0.5), (3, None, 0.5), (4, "i2", None), (5, "i3", float("nan")), (6, "i4", float("-inf"))]
    bad_rel = [(None, "i1", 1.0), (3, None, 1.0), (4, "i2", None), (5, "i99", -1.0), (6, "i98", float("nan"))]
    recs = spark.createDataFrame(_inject(rng, clean_recs, bad_recs, 17), RECS_SCHEMA)
    rel = spark.createDataFrame(_inject(rng, clean_rel, bad_rel, 11), REL_SCHEMA)
    cutoffs = ["1", "5", "10"]

    code, out = _run_cli(spark, tmp_path, recs, rel, "--on-invalid-rows", "quarantine", "--k", ",".join(cutoffs))
    assert code == EXIT_OK
    expected_per_user = evaluate(*_tables(spark, clean_recs, clean_rel), k=[1, 5, 10]).per_user.localCheckpoint()
    assert_df_equality(
        spark.read.parquet(str(out / "per_user")).orderBy("user_id", "k"),
        expected_per_user.orderBy("user_id", "k"),
        ignore_nullable=True,
    )
    rejected = spark.read.parquet(str(out / "rejected" / "recommendations"))
    assert rejected.count() == 17 and "reason" in rejected.columns
    assert spark.read.parquet(str(out / "rejected" / "relevance")).count() == 11
    manifest = json.loads((out / "summary.json").read_text())
    for table, n_bad, n_all in (("recommendations", 17, len(clean_recs) + 17), ("relevance", 11, len(clean_rel) + 11)):
        rows = manifest["rows"][table]
        assert rows["read"] == n_all
        assert rows["read"] == rows["used"] + sum(rows["set_aside"].values())
        assert sum(v for k, v in rows["set_aside"].items() if k.startswith("invalid: ")) == n_bad
    # Library: the same split, lazily.
    result = evaluate(recs, rel, k=[1, 5, 10], on_invalid_rows="quarantine")
    assert_df_equality(result.per_user.orderBy("user_id", "k"), expected_per_user.orderBy("user_id", "k"))
    assert result.rejected["relevance"].count() == 11


@pytest.mark.parametrize("recs_item, rel_item", [("int", "bigint"), ("bigint", "int"), ("smallint", "int")])
def test_integer_items_of_different_widths_compare_in_the_wider_type(spark, recs_item, rel_item):
    # Beyond the narrower type's range where the relevance holds the wider one: widened, never overflowed.
    big = 3_000_000_000 if rel_item == "bigint" else 40_000
    recs_rows = [(1, 7, 0.9), (1, 8, 0.8), (2, 7, 0.5)]
    rel_rows = [(1, 8, 2.0), (1, big, 3.0), (2, 7, 1.0)]  # big: judged, never recommended
    got = evaluate(
        spark.createDataFrame(recs_rows, f"user_id int, item_id {recs_item}, score double"),
        spark.createDataFrame(rel_rows, f"user_id int, item_id {rel_item}, relevance double"),
        k=[2],
    ).per_user.orderBy("user_id")
    expected = evaluate(
        spark.createDataFrame(recs_rows, "user_id int, item_id bigint, score double"),
        spark.createDataFrame(rel_rows, "user_id int, item_id bigint, relevance double"),
        k=[2],
    ).per_user.orderBy("user_id")
    assert_df_equality(got, expected)
    assert got.first().idcg > 3.0  # the ideal list holds the big item's grade


def test_rank_ties_are_per_segment_list(spark):
    # User 1 has one ranked list per model: rank 1 and 2 in each is no tie. Model c repeats rank 1.
    schema = "user_id int, item_id string, rnk int, model string"
    recs = spark.createDataFrame(
        [
            (1, "a", 1, "a"),
            (1, "b", 2, "a"),
            (1, "b", 1, "b"),
            (1, "a", 2, "b"),
            (1, "a", 1, "c"),
            (1, "b", 1, "c"),
            (2, "c", None, "a"),
        ],
        schema,
    )
    rel = spark.createDataFrame([(1, "b", 1.0)], REL_SCHEMA)
    options = dict(k=[2], rank_col="rnk", group_by=["model"])
    result = evaluate(recs, rel, on_invalid_rows="quarantine", **options)
    per_user = result.per_user.localCheckpoint()  # read twice below
    expected_rejected = spark.createDataFrame(
        [(1, "a", 1, "c", "rank_tie"), (1, "b", 1, "c", "rank_tie"), (2, "c", None, "a", "null_rank")],
        schema + ", reason string",
    )
    assert_df_equality(
        result.rejected["recommendations"], expected_rejected, ignore_row_order=True, ignore_nullable=True
    )
    clean = recs.filter("model IN ('a', 'b') AND rnk IS NOT NULL")
    assert_df_equality(
        per_user.filter("model != 'c'").orderBy("model", "user_id"),
        evaluate(clean, rel, **options).per_user.orderBy("model", "user_id"),
    )
    # Model c is still a segment, as in a run of c alone: its judged user has no recommendations left.
    assert [tuple(r) for r in per_user.filter("model = 'c'").select("user_id", "ndcg", "n_recommended").collect()] == [
        (1, 0.0, 0)
    ]
    report = validate(recs, rel, on_invalid_rows="quarantine", **options)["recommendations"]
    assert report.problems == {"null_rank": 1, "rank_tie": 2}


@pytest.mark.job
def test_quarantine_under_a_run_date_with_no_rejected_rows_and_reruns(spark, tmp_path):
    # Day 1: two bad recommendation rows, no bad relevance row (an empty rejected table).
    recs = spark.createDataFrame(GOOD_RECS + [(None, "z", 0.5), (3, "q", None)], RECS_SCHEMA)
    rel = spark.createDataFrame(GOOD_REL, REL_SCHEMA)
    flags = ("--on-invalid-rows", "quarantine", "--k", "2", "--run-date", "2026-11-21")
    code, out = _run_cli(spark, tmp_path, recs, rel, *flags)
    assert code == EXIT_OK

    def rejected(table):
        return spark.read.parquet(str(out / "rejected" / table)).filter("run_date = '2026-11-21'").drop("run_date")

    expected = spark.createDataFrame(
        [(None, "z", 0.5, "null_user"), (3, "q", None, "null_score")], RECS_SCHEMA + ", reason string"
    )
    assert_df_equality(rejected("recommendations"), expected, ignore_row_order=True, ignore_nullable=True)
    assert rejected("relevance").count() == 0
    manifest = json.loads((out / "_manifests" / "run_date=2026-11-21" / "summary.json").read_text())
    assert manifest["rows"]["relevance"] == {
        "read": 3,
        "used": 3,
        "set_aside": {"duplicates collapsed (max)": 0, "users excluded by a policy": 0},
    }
    # A rerun of the same date on clean input leaves no rejected row of the first run behind.
    code, out = _run_cli(spark, tmp_path, spark.createDataFrame(GOOD_RECS, RECS_SCHEMA), rel, *flags)
    assert code == EXIT_OK
    assert rejected("recommendations").count() == 0
    manifest = json.loads((out / "_manifests" / "run_date=2026-11-21" / "summary.json").read_text())
    assert manifest["rows"]["recommendations"]["read"] == 4
    assert not any(k.startswith("invalid: ") for k in manifest["rows"]["recommendations"]["set_aside"])


@pytest.mark.job
def test_accounting_with_segments_counts_each_judgement_once(spark, tmp_path):
    # User 1 has a list in models a and b: its two judgements serve both lists, read once each.
    recs = spark.createDataFrame(
        [(1, "a", 0.9, "a"), (1, "b", 0.8, "a"), (1, "c", 0.7, "a"), (1, "a", 0.5, "b"), (2, "c", 0.3, "a")],
        "user_id int, item_id string, score double, model string",
    )
    rel = spark.createDataFrame([(1, "b", 1.0), (1, "c", 2.0), (2, "c", 2.0), (3, "a", 0.0)], REL_SCHEMA)
    code, out = _run_cli(spark, tmp_path, recs, rel, "--k", "2", "--group-by", "model", "--zero-idcg", "exclude")
    assert code == EXIT_OK
    rows = json.loads((out / "summary.json").read_text())["rows"]
    assert rows["recommendations"] == {
        "read": 5,
        "used": 4,
        "set_aside": {
            "beyond the largest k": 1,
            "repeated item (slot kept, no gain)": 0,
            "users excluded by a policy": 0,
        },
    }
    assert rows["relevance"] == {
        "read": 4,
        "used": 3,
        "set_aside": {"duplicates collapsed (max)": 0, "users excluded by a policy": 1},
    }


@pytest.mark.job
def test_accounting_counts_each_reason(spark, tmp_path):
    recs = spark.createDataFrame(
        [(1, "a", 0.9), (1, "a", 0.8), (1, "b", 0.7), (1, "c", 0.6), (2, "a", 0.5), (3, "a", 0.4)], RECS_SCHEMA
    )
    rel = spark.createDataFrame([(1, "a", 1.0), (1, "a", 2.0), (2, "b", 0.0), (4, "a", 1.0)], REL_SCHEMA)
    code, out = _run_cli(
        spark, tmp_path, recs, rel, "--k", "2", "--duplicate-relevance", "max", "--zero-idcg", "exclude"
    )
    assert code == EXIT_OK
    rows = json.loads((out / "summary.json").read_text())["rows"]
    assert rows["recommendations"] == {
        "read": 6,
        "used": 1,
        "set_aside": {
            "beyond the largest k": 2,
            "repeated item (slot kept, no gain)": 1,
            "users excluded by a policy": 2,
        },
    }
    assert rows["relevance"] == {
        "read": 4,
        "used": 2,
        "set_aside": {"duplicates collapsed (max)": 1, "users excluded by a policy": 1},
    }


LOSSY_RECS = [(1, "a", 0.9), (1, "b", 0.8), (1, "c", 0.7), (2, "b", 0.5)]
LOSSY_REL = [(1, "a", 1.0), (1, "b", 2.0), (2, "b", 1.0)]


@pytest.fixture(scope="module")
def intact_accounting(spark, tmp_path_factory):
    """The input of the faulty stages below through the intact job: exit 0 (its accounting adds up)."""
    recs, rel = _tables(spark, LOSSY_RECS, LOSSY_REL)
    return _run_cli(spark, tmp_path_factory.mktemp("intact"), recs, rel, "--k", "2")[0]


@pytest.mark.job
@pytest.mark.parametrize("lost", ["recommendations", "relevance"])
def test_rows_lost_inside_the_evaluation_fail_the_accounting(
    spark, tmp_path, capsys, monkeypatch, lost, intact_accounting
):
    """Each reason is counted from its own rows: a stage that drops rows cannot hide them in
    another reason's count, so the job stops (exit 1) instead of reporting figures without them."""
    from ndcg_spark import evaluation
    from ndcg_spark.job.exits import EXIT_FAILURE

    assert intact_accounting == EXIT_OK
    recs, rel = _tables(spark, LOSSY_RECS, LOSSY_REL)
    capsys.readouterr()
    # A faulty stage: every row of item "b" disappears on its way into the lists.
    # evaluate() is the order of the stages: the stage is replaced where it calls it.
    stage = "ranked_lists" if lost == "recommendations" else "judged_lists"
    intact = getattr(evaluation, stage)
    monkeypatch.setattr(evaluation, stage, lambda df, *args: intact(df.filter("__ndcg_item <> 'b'"), *args))
    code, out = _run_cli(spark, tmp_path / "faulty", recs, rel, "--k", "2")
    assert code == EXIT_FAILURE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"row accounting of {lost} does not add up" in err[0]
    assert not (out / "summary.json").exists()


@pytest.mark.job
def test_a_bad_row_met_by_the_library_or_the_callers_action_is_an_input_data_error(spark, tmp_path, capsys):
    # A negative grade found while Spark computes: the caller's own action inside input_errors(),
    # and the library's own actions (compare's report), raise InputDataError with the job's line.
    recs, rel = _tables(spark, rel_rows=GOOD_REL + [(2, "d", -1.0)])
    with pytest.raises(InputDataError) as mine:
        with input_errors():
            evaluate(recs, rel, k=[2]).summary.collect()
    with pytest.raises(InputDataError) as library:
        compare(recs, recs, rel, k=[2]).report()
    code, out = _run_cli(spark, tmp_path, recs, rel)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_INPUT and not out.exists()
    words = "relevance column 'relevance' is negative (set negative_relevance = \"clip\" to read it as 0)"
    assert words in str(mine.value) and words in str(library.value) and words in line
    assert "\n" not in str(mine.value) and isinstance(mine.value.__cause__, Exception)
