"""The same product on Spark 3.5 and 4.x: what differs between them is detected in one module, each
fallback gives what the feature gives, figures and messages do not depend on ANSI mode, and a
Spark older than 3.5 stops at start with one line.

The suite runs on both versions (``.ci/run``); the tests here also take each fallback on the
version that would not need it, so both paths are exercised wherever the suite runs.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from chispa import assert_approx_df_equality
from pyspark.sql import types as T

from ndcg_spark import ConfigError, evaluate, spark_support
from ndcg_spark._spark import compat as _compat
from ndcg_spark._spark import counts as _counts
from ndcg_spark.errors import RowCheckFailed, as_error
from ndcg_spark.job import run
from ndcg_spark.job.exits import EXIT_CONFIG

ROOT = Path(__file__).resolve().parents[1]
RECS = "user_id int, item_id string, score double"
REL = "user_id int, item_id string, relevance double"


@pytest.mark.job
def test_a_pyspark_older_than_3_5_stops_the_job_before_spark_starts(monkeypatch, tmp_path, capsys):
    import pyspark

    monkeypatch.setattr(pyspark, "__version__", "3.4.1")
    code = run(["--config", str(ROOT / "conf" / "sample.toml"), "--output", str(tmp_path / "out")])
    assert code == EXIT_CONFIG
    err = capsys.readouterr().err.splitlines()
    assert err == ["ndcg-spark: error: PySpark 3.4.1 is installed; ndcg-spark needs Spark 3.5 or 4.x"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "version, stops", [("3.4.4", True), ("2.4.8", True), ("3.5.0", False), ("4.0.1", False), ("custom-build", False)]
)
def test_a_session_running_an_older_spark_stops_the_library_with_one_line(version, stops):
    session = SimpleNamespace(version=version)
    if not stops:
        spark_support.check_spark(session)
        return
    with pytest.raises(ConfigError) as info:
        spark_support.check_spark(session)
    assert str(info.value) == f"the session runs Spark {version}; ndcg-spark needs Spark 3.5 or 4.x"


@pytest.mark.parametrize("fallback", [False, True], ids=["as-installed", "3.5-parser"])
def test_ddl_parses_to_the_same_types_with_or_without_fromddl(spark, monkeypatch, fallback):
    if fallback:
        monkeypatch.delattr(T.DataType, "fromDDL", raising=False)
    expected = T.StructType([T.StructField("user_id", T.IntegerType()), T.StructField("score", T.DoubleType())])
    assert _compat.parse_ddl("user_id int, score double", spark) == expected
    assert _compat.parse_ddl("int", spark) == T.IntegerType()
    with pytest.raises(Exception, match="INTT"):
        _compat.parse_ddl("user_id intt", spark)


def test_the_condition_of_a_spark_error_is_read_on_either_version(spark):
    with pytest.raises(Exception) as info:
        spark.table("no_such_table_anywhere").collect()
    assert _compat.error_condition(info.value) == "TABLE_OR_VIEW_NOT_FOUND"
    # Spark 3.5's exceptions have only getErrorClass.
    old = SimpleNamespace(getErrorClass=lambda: "MALFORMED_CSV_RECORD")
    assert _compat.error_condition(old) == "MALFORMED_CSV_RECORD"
    with pytest.raises(AttributeError):
        _compat.error_condition(ValueError("not Spark's"))


def test_no_other_module_asks_which_spark_it_runs_on():
    checks = re.compile(
        r"getCondition|getErrorClass|fromDDL|_parse_datatype_string|__version__\s*[<>]|version\s*[<>]=?"
    )
    for path in sorted((ROOT / "ndcg_spark").rglob("*.py")):
        if path != ROOT / "ndcg_spark" / "_spark" / "compat.py":
            found = [line for line in path.read_text().splitlines() if checks.search(line)]
            assert not found, (path.name, found)


def _readme_tables(spark):
    recs = spark.createDataFrame([(1, "a", 0.9), (1, "b", 0.8), (1, "c", 0.7), (2, "d", 0.9), (2, "e", 0.5)], RECS)
    rel = spark.createDataFrame([(1, "a", 3.0), (1, "c", 1.0), (2, "e", 2.0), (2, "f", 1.0), (3, "g", 2.0)], REL)
    return recs, rel


def test_row_counts_without_an_observation_are_the_observed_counts(spark, monkeypatch):
    recs, rel = _readme_tables(spark)
    observed = evaluate(recs, rel, k=[1, 2]).row_accounting()
    # Spark Connect on 3.5 cannot observe: the rows are counted by a pass of their own.
    monkeypatch.setattr(_counts, "observes", lambda df: False)
    frame = spark.range(7)
    same, count = _counts.counted(frame)
    assert same is frame and count.rows() == 7
    assert evaluate(recs, rel, k=[1, 2]).row_accounting() == observed
    assert observed["recommendations_beyond_k"] == 1


@pytest.fixture(params=["true", "false"], ids=["ansi", "no-ansi"])
def ansi(spark, request):
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", request.param)
    yield request.param
    spark.conf.set("spark.sql.ansi.enabled", before)


def test_the_readme_figures_and_an_input_error_are_the_same_with_ansi_on_and_off(spark, ansi):
    recs, rel = _readme_tables(spark)
    result = evaluate(recs, rel, k=[2, 3], gain="exponential")
    expected = spark.createDataFrame(
        [
            (1, 2, 7.0, 7.0, 7.630929753571458, 0.9173194127129571, 3, 2),
            (1, 3, 8.0, 7.5, 7.630929753571458, 0.9828422279067397, 3, 2),
            (2, 2, 3.0, 1.8927892607143726, 3.6309297535714578, 0.52129602861432, 2, 2),
            (2, 3, 3.0, 1.8927892607143726, 3.6309297535714578, 0.52129602861432, 2, 2),
            (3, 2, 0.0, 0.0, 3.0, 0.0, 0, 1),
            (3, 3, 0.0, 0.0, 3.0, 0.0, 0, 1),
        ],
        "user_id int, k int, cg double, dcg double, idcg double, ndcg double, n_recommended int, n_relevant int",
    )
    assert_approx_df_equality(result.per_user.orderBy("user_id", "k"), expected, precision=1e-12, ignore_nullable=True)
    means = {r.k: r.mean_ndcg for r in result.summary.collect()}
    assert means == pytest.approx({2: 0.4795384804424257, 3: 0.5013794188403532}, abs=1e-12)
    bad = spark.createDataFrame([(1, "a", 1.0), (2, "e", -2.0)], REL)
    with pytest.raises(Exception) as info:
        evaluate(recs, bad, k=[2]).summary.collect()
    error = as_error(info.value)
    assert type(error) is RowCheckFailed
    assert str(error) == (
        "invalid input: relevance column 'relevance' is negative "
        '(set negative_relevance = "clip" to read it as 0), e.g. user_id=2/item_id=e'
    )


@pytest.mark.parametrize("ties", ["average", "worst"])
def test_scores_of_minus_zero_and_zero_are_one_tie(spark, ties):
    rel = spark.createDataFrame([(1, "a", 1.0), (1, "b", 0.0)], REL)

    def per_user(scores):
        recs = spark.createDataFrame([(1, "a", scores[0]), (1, "b", scores[1])], RECS)
        return evaluate(recs, rel, k=[1], ties=ties).per_user

    # Spark 3.5's array_distinct keeps -0.0 and 0.0 apart; the tie must be seen all the same.
    tied = per_user((0.0, 0.0))
    assert tied.first().ndcg == (0.5 if ties == "average" else 0.0)
    assert_approx_df_equality(per_user((-0.0, 0.0)), tied, precision=1e-12, ignore_nullable=True)
