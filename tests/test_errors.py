"""Errors at both ends of Spark: an input error raised inside a computation, and any exception Spark
raises (classic, Spark Connect's, a raw Py4J error) turned into our error with its condition and
parameters (the job's exit code for each condition is tested in tests/test_exits.py).

Every exception fed to :func:`as_error` is one Spark really raised: in classic mode as it comes,
or unwrapped to the raw Py4J error, or as Spark Connect's client builds it from what the server
sends for the same failure (the error's classes, condition and parameters, and its causes).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError

from ndcg_spark import errors, evaluate, read_table, validate
from ndcg_spark._spark.compat import error_condition
from ndcg_spark.errors import (
    ConfigError,
    InputDataError,
    NdcgError,
    RowCheckFailed,
    as_error,
    input_check,
)

RECS = "user_id int, item_id string, score double"
REL = "user_id int, item_id string, relevance double"
WAYS = ["classic", "py4j", "connect", "connect-without-details"]


def _raised(action) -> BaseException:
    with pytest.raises(Exception) as info:
        action()
    return info.value


def _java_chain(java):
    chain = []
    while java is not None:
        chain.append(java)
        java = java.getCause()
    return chain


def _hierarchy(java):
    names, cls = [], java.getClass()
    while cls is not None:
        names.append(cls.getName())
        cls = cls.getSuperclass()
    return names


def _as_connect(java, details: bool = True) -> BaseException:
    """The exception Spark Connect's client raises for the failure of the Java exception ``java``.

    The server sends the error's classes, condition, parameters and SQLSTATE (gRPC ErrorInfo) and,
    when asked, each error of its cause chain (FetchErrorDetails); the client's own
    ``convert_exception`` reads them.
    """
    from google.rpc.error_details_pb2 import ErrorInfo
    from pyspark.errors.exceptions.connect import convert_exception
    from pyspark.sql.connect import proto as pb2

    chain = _java_chain(java)
    if not _connect_fetches_causes():
        # Spark 3.5's server sends the error's classes and its message, cut at 2,048 characters.
        classes = json.dumps(_hierarchy(chain[0]))
        info = ErrorInfo(reason=_hierarchy(chain[0])[0], metadata={"classes": classes})
        return convert_exception(info, str(chain[0].getMessage())[:2048])
    errors = []
    for i, java in enumerate(chain):
        error = pb2.FetchErrorDetailsResponse.Error(
            error_type_hierarchy=_hierarchy(java), message=str(java.getMessage())
        )
        if i + 1 < len(chain):
            error.cause_idx = i + 1
        try:
            error.spark_throwable.error_class = error_condition(java)
            error.spark_throwable.message_parameters.update(dict(java.getMessageParameters()))
            error.spark_throwable.sql_state = java.getSqlState()
        except Exception:  # noqa: BLE001 - not a SparkThrowable: no condition to send
            error.ClearField("spark_throwable")
        errors.append(error)
    root = errors[0]
    metadata = {"classes": json.dumps(list(root.error_type_hierarchy))}
    if root.HasField("spark_throwable"):
        metadata["errorClass"] = root.spark_throwable.error_class
        metadata["messageParameters"] = json.dumps(dict(root.spark_throwable.message_parameters))
        metadata["sqlState"] = root.spark_throwable.sql_state
    info = ErrorInfo(reason=root.error_type_hierarchy[0], metadata=metadata)
    resp = pb2.FetchErrorDetailsResponse(root_error_idx=0, errors=errors) if details else None
    return convert_exception(info, root.message, resp)


def _connect_fetches_causes() -> bool:
    """Whether this Spark Connect client fetches the causes of an error (Spark 4), not only its message."""
    from pyspark.sql.connect import proto as pb2

    return hasattr(pb2, "FetchErrorDetailsResponse")


def _failure(way: str, df) -> BaseException:
    """The exception of collecting ``df``, as it reaches a program the given ``way``."""
    caught = _raised(df.collect)
    # pyspark converts the Java exceptions it knows and lets the others through as Py4J errors.
    java = caught.java_exception if isinstance(caught, Py4JJavaError) else caught._origin
    if way == "classic":
        return caught
    if way == "py4j":
        return caught if isinstance(caught, Py4JJavaError) else Py4JJavaError("collectToPython failed", java)
    return _as_connect(java, details=way == "connect")


def _negative_relevance(spark):
    recs = spark.createDataFrame([(1, "A", 0.9), (2, "B", 0.8)], RECS)
    rel = spark.createDataFrame([(1, "A", 1.0), (2, "B", -1.0)], REL)
    return evaluate(recs, rel, k=[3]).summary


@pytest.mark.parametrize("way", WAYS)
def test_a_row_that_fails_a_check_inside_spark_is_an_input_error_with_the_checks_words(spark, way):
    error = as_error(_failure(way, _negative_relevance(spark)))
    check = (
        "relevance column 'relevance' is negative "
        '(set negative_relevance = "clip" to read it as 0), e.g. user_id=2/item_id=B'
    )
    assert type(error) is RowCheckFailed and str(error) == f"invalid input: {check}"
    assert (error.condition, error.parameters) == ("INVALID_INPUT.ROW_CHECK", {"check": check})


@pytest.mark.parametrize("way", WAYS)
def test_input_check_stops_on_the_first_row_where_its_condition_holds(spark, way):
    df = spark.createDataFrame([(1,), (-7,)], "x int").filter(
        input_check("x < 0", "concat('x is negative: ', CAST(x AS STRING))")
    )
    error = as_error(_failure(way, df))
    assert (type(error), str(error)) == (RowCheckFailed, "invalid input: x is negative: -7")
    kept = spark.createDataFrame([(1,), (2,)], "x int").filter(input_check("x < 0", "'never'"))
    assert sorted(r.x for r in kept.collect()) == [1, 2]


@pytest.mark.parametrize("way", WAYS)
def test_another_raise_error_is_a_failure_not_an_input_error(spark, way):
    error = as_error(_failure(way, spark.range(1).selectExpr("raise_error('boom') AS x")))
    assert type(error) is NdcgError and error.condition == "FAILED.EXCEPTION"
    assert "boom" in str(error) and "\n" not in str(error) and "SQLSTATE" not in str(error), str(error)
    # One plain line: Spark's words, no Python or Java class name of Spark's plumbing.
    assert str(error).startswith("Spark failed: ") and "Exception" not in str(error), str(error)
    assert "Py4J" not in str(error) and "org.apache" not in str(error), str(error)


def _folder(path: Path, files: dict) -> str:
    path.mkdir()
    for name, text in files.items():
        (path / name).write_text(text)
    return str(path)


FIRST = "user_id,item_id,score\n1,A,0.9\n1,X,0.5\n1,Y,0.4\n1,Z,0.3\n"
REFUSED_CSV = [
    pytest.param(
        "user_id,item_id,score\n2,B,0.9,7\n", "has a row whose fields do not match its header: '2,B,0.9,7'", id="row"
    ),
    pytest.param(
        "item_id,user_id,score\nB,2,0.9\n",
        "has the header 'item_id, user_id, score' where the table's columns are 'user_id, item_id, score'",
        id="header",
    ),
    pytest.param("user_id,item_id\n2,B\n", "has a header of 2 columns where the table has 3", id="header-length"),
]


# Without the error details, Spark Connect gives the client the failure to read the file, not its cause.
@pytest.mark.parametrize("way", [w for w in WAYS if w != "connect-without-details"])
@pytest.mark.parametrize("second, words", REFUSED_CSV)
def test_a_csv_file_spark_refuses_is_an_input_error_naming_it(spark, tmp_path, way, second, words):
    if way == "connect" and "fields do not match" in words and not _connect_fetches_causes():
        pytest.skip("Spark 3.5's Connect server sends an error's first 2,048 characters, which end before its cause")
    recs = read_table(spark, _folder(tmp_path / "recs", {"a.csv": FIRST, "b.csv": second}), "csv")
    rel = spark.createDataFrame([("1", "A", 1.0)], "user_id string, item_id string, relevance double")
    error = as_error(_failure(way, evaluate(recs, rel, k=[3]).summary))
    assert type(error) is InputDataError and error.condition == "INVALID_INPUT.UNREADABLE_FILE", str(error)
    path = (tmp_path / "recs" / "b.csv").as_uri()
    assert str(error).startswith(f"invalid input: {path} {words}"), str(error)


@pytest.mark.parametrize("way", WAYS)
def test_parquet_files_that_disagree_on_a_type_are_an_input_error_naming_file_and_column(spark, tmp_path, way):
    path = tmp_path / "rel"
    spark.createDataFrame([(1, "A", 1.0)], REL).coalesce(1).write.parquet(str(path))
    decimal = spark.createDataFrame([(2, "B", 1.0)], REL).selectExpr(
        "user_id", "item_id", "CAST(relevance AS DECIMAL(10, 2)) AS relevance"
    )
    decimal.coalesce(1).write.mode("append").parquet(str(path))
    recs = spark.createDataFrame([(1, "A", 0.9), (2, "B", 0.9)], RECS)
    rel = read_table(spark, str(path), role="relevance")
    error = as_error(_failure(way, evaluate(recs, rel, k=[3]).summary))
    assert type(error) is InputDataError, str(error)
    # Spark takes the table's type from either file; the other file is the one named.
    files = {f.name: f for f in path.glob("part-*.parquet")}
    named = [name for name in files if f"/rel/{name} stores column 'relevance' as " in str(error)]
    assert len(named) == 1, str(error)
    assert str(error).endswith(": the files of one table must store each column with one type")


@pytest.mark.parametrize("way", [w for w in WAYS if w != "connect-without-details"])
@pytest.mark.parametrize("damage", ["truncated", "not-parquet"])
def test_a_truncated_or_damaged_parquet_file_is_an_input_error_naming_it(spark, tmp_path, way, damage):
    path = tmp_path / "rel"
    spark.createDataFrame([(1, "A", 1.0)], REL).coalesce(1).write.parquet(str(path))
    whole = next(path.glob("part-*.parquet")).read_bytes()
    # With the schema given, no file is read before the evaluation reads them all.
    (path / "part-zz-damaged.parquet").write_bytes(
        whole[: len(whole) // 2] if damage == "truncated" else b"user_id,item_id,relevance\n2,B,1.0\n"
    )
    recs = spark.createDataFrame([(1, "A", 0.9), (2, "B", 0.9)], RECS)
    rel = spark.read.schema(REL).parquet(str(path))
    error = as_error(_failure(way, evaluate(recs, rel, k=[3]).summary))
    reason = (
        f"{(path / 'part-zz-damaged.parquet').as_uri()} cannot be "
        "read as Parquet: it is truncated, damaged or not a Parquet file"
    )
    assert (type(error), error.condition, str(error)) == (
        InputDataError,
        "INVALID_INPUT.UNREADABLE_FILE",
        f"invalid input: {reason}",
    )
    assert error.parameters == {"reason": reason}


def test_our_errors_are_themselves_and_any_other_exception_a_failure_in_one_line():
    own = InputDataError("relevance table is empty")
    assert as_error(own) is own
    error = as_error(KeyError("line one\nline two"))
    assert (type(error), error.condition, str(error)) == (
        NdcgError,
        "FAILED.EXCEPTION",
        "KeyError: 'line one\\nline two'",
    )
    assert error.parameters == {"type": "KeyError", "message": "'line one\\nline two'"}


def test_our_errors_carry_a_condition_and_parameters_and_keep_their_words():
    own = InputDataError("recommendations table is empty")
    assert (own.condition, own.parameters, str(own)) == (
        "INVALID_INPUT",
        {},
        "recommendations table is empty",
    )
    assert isinstance(own, ValueError) and isinstance(ConfigError("x"), ValueError)  # caught as before
    assert ConfigError("x").condition == ConfigError.CONDITION == "INVALID_CONFIG"
    assert RowCheckFailed("invalid input: x", parameters={"check": "x"}).condition == "INVALID_INPUT.ROW_CHECK"
    pickled = pickle.loads(pickle.dumps(RowCheckFailed("invalid input: x", parameters={"check": "x"})))
    assert (type(pickled), str(pickled), pickled.parameters) == (
        RowCheckFailed,
        "invalid input: x",
        {"check": "x"},
    )


def test_each_problem_of_the_input_carries_its_condition_and_parameters(spark, tmp_path):
    rel = spark.createDataFrame([(1, "A", 1.0)], REL)

    def raised(action) -> tuple:
        with pytest.raises(InputDataError) as info:
            action()
        return info.value.condition, info.value.parameters

    points = spark.createDataFrame([(1, "A", 0.9)], "user_id int, item_id string, points double")
    assert raised(lambda: evaluate(points, rel, k=[3])) == (
        errors.MISSING_COLUMN,
        {"table": "recommendations", "column": "score"},
    )
    text = spark.createDataFrame([(1, "A", "0.9")], "user_id int, item_id string, score string")
    assert raised(lambda: evaluate(text, rel, k=[3])) == (
        errors.COLUMN_TYPE,
        {"table": "recommendations", "column": "score", "type": "string"},
    )
    keyed = spark.createDataFrame([("1", "A", 0.9)], "user_id string, item_id string, score double")
    assert raised(lambda: evaluate(keyed, rel, k=[3])) == (errors.TYPES_DIFFER, {"column": "user_id"})
    empty = spark.createDataFrame([], RECS)
    assert raised(lambda: validate(empty, rel)) == (errors.EMPTY_TABLE, {"table": "recommendations"})
    missing = str(tmp_path / "nowhere")
    condition, parameters = raised(lambda: read_table(spark, missing))
    assert (condition, parameters["table"], parameters["source"]) == (
        errors.UNREADABLE_TABLE,
        "recommendations",
        missing,
    )
    assert parameters["reason"] == "it does not exist"
