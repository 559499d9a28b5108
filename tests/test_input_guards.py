"""Inputs that would give a wrong figure if read as they come: a CSV folder whose files disagree on
the header, Parquet files that disagree on a column's type, relevance whose gains add up past the
largest double. Each stops the run with one line (exit 3 in the job); and a user whose NDCG is not
a number is in no histogram bin."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from chispa import assert_df_equality

from ndcg_spark import evaluate, read_table
from ndcg_spark.errors import malformed_row
from ndcg_spark.job import run
from ndcg_spark.job.exits import EXIT_INPUT, EXIT_OK
from ndcg_spark.report import ndcg_histogram
from tests.helpers import reference_ndcg

# Two users, each with its one judged item ranked first: NDCG 1.0 for both.
REL_CSV = "user_id,item_id,relevance\n1,A,1\n2,B,1\n3,C,1\n"
HEADER = "user_id,item_id,score\n"
# The first file is the largest, so it is the one Spark takes the columns from.
FIRST = HEADER + "1,A,0.9\n1,X,0.5\n1,Y,0.4\n1,Z,0.3\n"


def _folder(path: Path, files: dict) -> str:
    path.mkdir()
    for name, text in files.items():
        (path / name).write_text(text)
    return str(path)


def _job(recs: str, rel: str, out: Path, *flags: str) -> int:
    argv = ["--recommendations", recs, "--relevance", rel, "--output", str(out), "--k", "3"]
    return run([*argv, *flags])


def _error_text(action) -> str:
    with pytest.raises(Exception) as info:
        action()
    return str(info.value)


# ----------------------------------------------------------------------------- CSV headers

BAD_HEADERS = [
    pytest.param(
        "item_id,user_id,score\nB,2,0.9\nC,3,0.9\n",
        "has the header 'item_id, user_id, score' where the table's columns are 'user_id, item_id, score'",
        id="columns-in-another-order",
    ),
    pytest.param(
        "2,B,0.9\n3,C,0.9\n",
        "has the header '2, B, 0.9' where the table's columns are 'user_id, item_id, score'",
        id="no-header",
    ),
    pytest.param("user_id,item_id\n2,B\n3,C\n", "has a header of 2 columns where the table has 3", id="fewer-columns"),
]


@pytest.mark.parametrize("second, words", BAD_HEADERS)
def test_a_csv_file_whose_header_is_not_the_tables_stops_the_read_naming_it(spark, tmp_path, second, words):
    recs = read_table(spark, _folder(tmp_path / "recs", {"a.csv": FIRST, "b.csv": second}), "csv")
    rel = read_table(spark, _write(tmp_path / "rel.csv", REL_CSV), "csv", role="relevance")
    text = _error_text(lambda: evaluate(recs, rel, k=[3]).summary.collect())
    message = malformed_row(text)
    assert message is not None and "\n" not in message, text[:2000]
    assert re.fullmatch(rf"\S*/recs/b\.csv {re.escape(words)}: every CSV file of a table must begin with .*", message)


@pytest.mark.job
@pytest.mark.parametrize("second, words", BAD_HEADERS)
def test_job_exits_3_with_one_line_on_a_csv_file_whose_header_is_not_the_tables(tmp_path, capsys, second, words):
    recs = _folder(tmp_path / "recs", {"a.csv": FIRST, "b.csv": second})
    rel = _write(tmp_path / "rel.csv", REL_CSV)
    assert _job(recs, rel, tmp_path / "out", "--format", "csv") == EXIT_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ndcg-spark: error: invalid input: "), err
    assert "/recs/b.csv " + words in err[0], err
    assert not (tmp_path / "out" / "summary.json").exists()


@pytest.mark.job
def test_csv_files_with_one_header_are_read_by_name(spark, tmp_path):
    """The check refuses nothing it should read: the same header in every file (in any case),
    and a header with an empty name (a pandas index) or a name that Spark itself would give one."""
    files = {"a.csv": FIRST, "b.csv": "USER_ID,item_id,Score\n2,B,0.9\n", "c.csv": HEADER + "3,C,0.9\n"}
    recs = _folder(tmp_path / "recs", files)
    rel = _write(tmp_path / "rel.csv", REL_CSV)
    assert _job(recs, rel, tmp_path / "out", "--format", "csv") == EXIT_OK
    metrics = json.loads((tmp_path / "out" / "summary.json").read_text())["metrics"]
    lists = {"1": ["A", "X", "Y"], "2": ["B"], "3": ["C"]}
    judged = {"1": {"A": 1.0}, "2": {"B": 1.0}, "3": {"C": 1.0}}
    assert metrics[0]["mean_ndcg"] == pytest.approx(sum(reference_ndcg(lists[u], judged[u], 3) for u in lists) / 3)
    for header, first in ((",user_id,item_id,score\n", "_c0"), ("_c0,user_id,item_id,score\n", "_c0")):
        path = _folder(
            tmp_path / f"named{len(header)}", {"a.csv": header + "0,1,A,0.9\n", "b.csv": header + "1,2,B,1\n"}
        )
        got = read_table(spark, path, "csv").select(first, "user_id", "item_id", "score")
        expected = spark.createDataFrame(
            [("0", "1", "A", 0.9), ("1", "2", "B", 1.0)],
            f"{first} string, user_id string, item_id string, score double",
        )
        assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


# ----------------------------------------------------------------------------- Parquet types


def _mixed_parquet(spark, path: Path) -> str:
    """A relevance folder of two Parquet files, one with a double relevance, the other a decimal.

    Spark takes the table's schema from either file; each file fails the other's type.
    """
    spark.createDataFrame([(1, "A", 1.0)], "user_id int, item_id string, relevance double").coalesce(1).write.parquet(
        str(path)
    )
    decimal = spark.createDataFrame([(2, "B", 1.0)], "user_id int, item_id string, relevance double")
    decimal.selectExpr("user_id", "item_id", "CAST(relevance AS DECIMAL(10, 2)) AS relevance").coalesce(1).write.mode(
        "append"
    ).parquet(str(path))
    return str(path)


PARQUET_WORDS = (
    r"\S*/rel/part-\S+\.parquet stores column 'relevance' as (INT64|DOUBLE) where the table's schema has "
    r"(double|decimal\(10,2\)): the files of one table must store each column with one type"
)


def test_parquet_files_that_disagree_on_a_columns_type_stop_the_read_naming_file_and_column(spark, tmp_path):
    rel = read_table(spark, _mixed_parquet(spark, tmp_path / "rel"), role="relevance")
    recs = spark.createDataFrame([(1, "A", 0.9), (2, "B", 0.9)], "user_id int, item_id string, score double")
    message = malformed_row(_error_text(lambda: evaluate(recs, rel, k=[3]).summary.collect()))
    assert message is not None and re.fullmatch(PARQUET_WORDS, message), message
    found, expected = re.search(r"as (\w+) where the table's schema has (\S+):", message).groups()
    # The file's own type (physical: a decimal(10,2) is stored as INT64) against the other file's.
    assert (found, expected) in (("INT64", "double"), ("DOUBLE", "decimal(10,2)")), message


@pytest.mark.job
def test_job_exits_3_with_one_line_on_parquet_files_that_disagree_on_a_type(spark, tmp_path, capsys):
    rel = _mixed_parquet(spark, tmp_path / "rel")
    recs = spark.createDataFrame([(1, "A", 0.9), (2, "B", 0.9)], "user_id int, item_id string, score double")
    recs.write.parquet(str(tmp_path / "recs"))
    assert _job(str(tmp_path / "recs"), rel, tmp_path / "out") == EXIT_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert re.fullmatch("ndcg-spark: error: invalid input: " + PARQUET_WORDS, err[0]), err


@pytest.mark.parametrize(
    "text, message",
    [
        (  # Spark 3's words
            "Parquet column cannot be converted in file file:/d/p.parquet. Column: [score], Expected: double, "
            "Found: BINARY",
            "file:/d/p.parquet stores column 'score' as BINARY where the table's schema has double",
        ),
        (  # a type with spaces
            "Encountered error while reading file file:/d/p.parquet. Data type mismatches when reading Parquet "
            "column [a]. Expected Spark type STRUCT<b: INT>, actual Parquet type INT64. SQLSTATE: KD001",
            "file:/d/p.parquet stores column 'a' as INT64 where the table's schema has STRUCT<b: INT>",
        ),
        ("[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:/d/p.parquet.", None),
    ],
)
def test_parquet_type_errors_are_worded_from_sparks_text(text, message):
    got = malformed_row(text)
    assert got == message if message is None else got.startswith(message + ": the files of one table")


# ----------------------------------------------------------------------------- sums that overflow

OVERFLOWS = [
    pytest.param("linear", 1.5e308, id="linear-1.5e308"),
    pytest.param("exponential", 1023.0, id="exponential-1023"),
]


def _three_grades(spark, grade: float):
    """User 1 has three items of ``grade`` (their gains add up past the largest double); user 2 a plain one."""
    recs = spark.createDataFrame(
        [(1, "a", 3.0), (1, "b", 2.0), (1, "c", 1.0), (2, "a", 1.0)], "user_id int, item_id string, score double"
    )
    rel = spark.createDataFrame(
        [(1, "a", grade), (1, "b", grade), (1, "c", grade), (2, "a", 1.0)],
        "user_id int, item_id string, relevance double",
    )
    return recs, rel


@pytest.mark.parametrize("gain, grade", OVERFLOWS)
def test_gains_that_add_up_past_the_largest_double_stop_the_run_naming_the_user(spark, gain, grade):
    g = grade if gain == "linear" else 2.0**grade - 1.0
    assert math.isfinite(g) and math.isinf(g + g + g)  # each gain is a double, their sum is not
    recs, rel = _three_grades(spark, grade)
    result = evaluate(recs, rel, k=[3], gain=gain)
    for frame in (result.summary, result.per_user):
        text = _error_text(frame.collect)
        assert "NDCG_INVALID_INPUT: relevance too large to add up: the CG@3 of user_id=1 overflows a double" in text
    # Per segment, the list is named by its segment too.
    models = recs.selectExpr("'m' AS model", "*")
    text = _error_text(evaluate(models, rel, k=[3], gain=gain, group_by=["model"]).summary.collect)
    assert "the CG@3 of model=m/user_id=1 overflows a double" in text


def test_gains_that_add_up_below_the_largest_double_give_their_ndcg(spark):
    recs, rel = _three_grades(spark, 5e307)
    got = evaluate(recs, rel, k=[3]).per_user.select("user_id", "ndcg")
    # Ranked as the ideal: DCG and IDCG are the same sum (2.2e308 would overflow; 5e307 * 2.13 does not).
    expected = spark.createDataFrame([(1, 1.0), (2, 1.0)], "user_id int, ndcg double")
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.job
@pytest.mark.parametrize("gain, grade", OVERFLOWS)
def test_job_exits_3_with_one_line_when_the_sums_overflow(tmp_path, capsys, gain, grade):
    recs = _write(tmp_path / "recs.csv", "user_id,item_id,score\n1,a,3\n1,b,2\n1,c,1\n2,a,1\n")
    rel = _write(tmp_path / "rel.csv", f"user_id,item_id,relevance\n1,a,{grade!r}\n1,b,{grade!r}\n1,c,{grade!r}\n")
    assert _job(recs, rel, tmp_path / "out", "--format", "csv", "--gain", gain) == EXIT_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "ndcg-spark: error: invalid input: relevance too large to add up: the CG@3 of user_id=1 overflows a double "
        "(its gains add up past 1.8e308)"
    ], err
    assert not (tmp_path / "out" / "summary.json").exists()


@pytest.mark.job
def test_dcgs_that_add_up_past_the_largest_double_in_a_mean_stop_the_run(spark, tmp_path, capsys):
    """Each user's DCG is a double, the sum the mean adds up is not: an input error, never inf in the summary."""
    recs = spark.createDataFrame([(1, "a", 1.0), (2, "a", 1.0)], "user_id int, item_id string, score double")
    rel = spark.createDataFrame([(1, "a", 1e308), (2, "a", 1e308)], "user_id int, item_id string, relevance double")
    text = _error_text(evaluate(recs, rel, k=[1]).summary.collect)
    assert "NDCG_INVALID_INPUT: relevance too large to add up: the mean DCG@1 overflows a double" in text
    recs.write.parquet(str(tmp_path / "recs"))
    rel.write.parquet(str(tmp_path / "rel"))
    assert _job(str(tmp_path / "recs"), str(tmp_path / "rel"), tmp_path / "out", "--k", "1") == EXIT_INPUT
    assert capsys.readouterr().err.strip().splitlines() == [
        "ndcg-spark: error: invalid input: relevance too large to add up: the mean DCG@1 overflows a double "
        "(the DCGs of its users add up past 1.8e308)"
    ]


# ----------------------------------------------------------------------------- histogram


def test_a_user_whose_ndcg_is_not_a_number_is_in_no_histogram_bin(spark):
    values = [0.0, 0.05, 0.55, 0.999, 1.0, None, float("nan"), float("inf")]
    per_user = spark.createDataFrame([(u, 3, v) for u, v in enumerate(values)], "user_id int, k int, ndcg double")
    bins = {}
    for v in values:
        if v is not None and math.isfinite(v):
            b = min(int(math.floor(v * 20)), 19)
            bins[b] = bins.get(b, 0) + 1
    expected = spark.createDataFrame([(3, b, n) for b, n in bins.items()], "k int, bin int, users bigint")
    assert_df_equality(ndcg_histogram(per_user), expected, ignore_row_order=True, ignore_nullable=True)
