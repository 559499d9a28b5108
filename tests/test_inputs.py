"""Inputs as users have them: CSV and JSON keys kept as written, a schema and a format per table,
TREC runs and qrels, and read or usage errors in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import pytrec_eval
from chispa import assert_df_equality

from ndcg_spark import ConfigError, InputDataError, evaluate, read_table
from ndcg_spark.job import run
from ndcg_spark.job.exits import EXIT_CONFIG, EXIT_INPUT, EXIT_OK
from tests.helpers import reference_ndcg, trec_expected

ROOT = Path(__file__).resolve().parents[1]
TREC_CUTOFFS = "5,10,15,20,30,100,200,500,1000"

# Two users whose items differ only by leading zeros: `01` is not `1`, `007` is not `7`.
RECS_CSV = "user_id,item_id,score\n1,01,0.9\n1,1,0.8\n2,007,0.9\n2,7,0.5\n2,70,0.1\n"
REL_CSV = "user_id,item_id,relevance\n1,1,1\n2,7,2\n2,070,3\n"
LISTS = {"1": ["01", "1"], "2": ["007", "7", "70"]}
JUDGED = {"1": {"1": 1.0}, "2": {"7": 2.0, "070": 3.0}}


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _err_lines(capsys) -> list:
    return capsys.readouterr().err.strip().splitlines()


def _mean(lists, judged, k):
    return sum(reference_ndcg(lists[u], judged.get(u, {}), k) for u in lists) / len(lists)


# ----------------------------------------------------------------------------- the library reader


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_read_table_keeps_keys_as_written(spark, tmp_path, fmt):
    if fmt == "csv":
        path = _write(tmp_path / "recs.csv", "user_id,item_id,score\n01,007,0.5\n1,7,2\n1,,\n")
    else:  # a key quoted or not, a number written as an integer, a missing score
        path = _write(
            tmp_path / "recs.json",
            '{"user_id": "01", "item_id": "007", "score": 0.5}\n{"user_id": 1, "item_id": 7, "score": 2}\n'
            '{"user_id": 1, "item_id": null}\n',
        )
    expected = spark.createDataFrame(
        [("01", "007", 0.5), ("1", "7", 2.0), ("1", None, None)], "user_id string, item_id string, score double"
    )
    got = read_table(spark, path, fmt).select("user_id", "item_id", "score")
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


def test_read_table_schema_sets_the_types_of_the_columns_it_names(spark, tmp_path):
    csv = _write(tmp_path / "rel.csv", "user_id,item_id,relevance,note\n007,01,2,x\n8,1,0,\n")
    got = read_table(spark, csv, "csv", role="relevance", schema="user_id int, relevance int")
    expected = spark.createDataFrame(
        [(7, "01", 2, "x"), (8, "1", 0, None)], "user_id int, item_id string, relevance int, note string"
    )
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)
    # Typed formats keep their types unless a schema names the column.
    spark.createDataFrame([(7, 1, 0.5)], "user_id int, item_id bigint, score double").write.parquet(
        str(tmp_path / "recs")
    )
    assert read_table(spark, str(tmp_path / "recs")).dtypes == [
        ("user_id", "int"),
        ("item_id", "bigint"),
        ("score", "double"),
    ]
    assert read_table(spark, str(tmp_path / "recs"), schema="item_id string").dtypes[1] == ("item_id", "string")


def test_read_table_value_that_does_not_fit_stops_with_column_and_value(spark, tmp_path):
    csv = _write(tmp_path / "recs.csv", "user_id,item_id,score\n1,a,0.5\n1,b,high\n")
    recs = read_table(spark, csv, "csv")
    with pytest.raises(Exception, match="recommendations column 'score' holds 'high', which is not a number"):
        recs.collect()
    with pytest.raises(Exception, match="column 'user_id' holds 'u1', which is not an integer"):
        read_table(spark, _write(tmp_path / "r.csv", "user_id\nu1\n"), "csv", schema="user_id int").collect()


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(format="xls"), ConfigError, "format = 'xls' is not one of parquet, csv, json, orc, trec"),
        (dict(format="trec", role="user_attributes"), ConfigError, "not user attributes"),
        (dict(format="csv", schema="user_id integr"), ConfigError, "schema 'user_id integr' does not parse"),
        (dict(format="csv", schema="user int"), InputDataError, "schema names column 'user', which the table"),
        (dict(format="parquet"), InputDataError, "as parquet: it is not a Parquet file"),
        (dict(format="orc"), InputDataError, "as orc: it is not an ORC file"),
        (dict(format="json"), InputDataError, "as json: it is not a JSON lines file: Unrecognized token 'user_id'"),
        (dict(format="trec"), InputDataError, "has 1 column where a TREC run has 6 (qid Q0 docno rank score tag)"),
    ],
)
def test_read_table_refuses_with_the_cause(spark, tmp_path, kwargs, error, words):
    csv = _write(tmp_path / "recs.csv", "user_id,item_id,score\n1,a,0.5\n")
    with pytest.raises(error) as info:
        read_table(spark, csv, **kwargs)
    assert words in str(info.value) and "\n" not in str(info.value)


@pytest.mark.job
@pytest.mark.parametrize("fmt, text", [("csv", "user_id,item_id,score\n"), ("json", ""), ("trec", "\n")])
def test_an_empty_file_is_empty_whatever_the_format(spark, tmp_path, capsys, fmt, text):
    path = _write(tmp_path / f"recs.{fmt}", text)
    rel = _write(tmp_path / "rel.csv", REL_CSV)
    argv = ["--recommendations", path, "--format", fmt, "--relevance", rel, "--relevance-format", "csv"]
    assert run([*argv, "--output", str(tmp_path / "out")]) == EXIT_INPUT
    err = _err_lines(capsys)
    assert len(err) == 1 and ("recommendations table is empty" in err[0] or "it is empty" in err[0]), err


def test_trec_files_read_as_run_and_qrels(spark, tmp_path):
    run_path = _write(tmp_path / "run", "q1 Q0 d1 1 2.5 sys\n\nq1\tQ0\td2  2\t 1.5 sys\n")
    qrels_path = _write(tmp_path / "qrels", "q1 0 d1 1\nq1 1 d3 -1\n")
    assert_df_equality(
        read_table(spark, run_path, "trec"),
        spark.createDataFrame(
            [("q1", "Q0", "d1", 1, 2.5, "sys"), ("q1", "Q0", "d2", 2, 1.5, "sys")],
            "user_id string, q0 string, item_id string, rank int, score double, tag string",
        ),
        ignore_nullable=True,
    )
    assert_df_equality(
        read_table(spark, qrels_path, "trec", role="relevance"),
        spark.createDataFrame(
            [("q1", "0", "d1", 1.0), ("q1", "1", "d3", -1.0)],  # read as written: -1 stays -1
            "user_id string, iteration string, item_id string, relevance double",
        ),
        ignore_nullable=True,
    )


def test_trec_negative_relevance_ties_and_ranks_as_trec_eval(spark, tmp_path):
    """trec_eval ignores the rank column, breaks score ties by docno descending and gives a negative
    relevance no gain: pytrec_eval (trec_eval's code) on the same files is the oracle."""
    run_rows = [("q1", "d1", 9, 2.0), ("q1", "d2", 1, 2.0), ("q1", "d3", 2, 1.0), ("q1", "d4", 3, 3.0)]
    run_rows += [("q2", "a", 1, 0.5), ("q2", "b", 2, 0.4), ("q2", "c", 3, 0.4)]
    qrels_rows = [("q1", "0", "d1", 2), ("q1", "0", "d3", 1), ("q1", "1", "d4", -1), ("q1", "0", "d9", 3)]
    qrels_rows += [("q2", "0", "b", 1), ("q2", "2", "c", 2), ("q2", "0", "a", -2)]
    run_path = _write(tmp_path / "run", "".join(f"{q} Q0 {d} {r} {s} tag\n" for q, d, r, s in run_rows))
    qrels_path = _write(tmp_path / "qrels", "".join(f"{q} {i} {d} {v}\n" for q, i, d, v in qrels_rows))
    recs = read_table(spark, run_path, "trec")
    rel = read_table(spark, qrels_path, "trec", role="relevance")
    with pytest.raises(Exception, match="negative"):
        evaluate(recs, rel, k=[1, 2, 3]).per_user.collect()
    got = evaluate(recs, rel, k=[1, 2, 3], tie_break="item_descending", negative_relevance="clip").per_user
    oracle = pytrec_eval.RelevanceEvaluator(
        {q: {d: v for q2, _, d, v in qrels_rows if q2 == q} for q in ("q1", "q2")}, {"ndcg_cut.1,2,3"}
    ).evaluate({q: {d: s for q2, d, _, s in run_rows if q2 == q} for q in ("q1", "q2")})
    expected = {(q, k): oracle[q][f"ndcg_cut_{k}"] for q in oracle for k in (1, 2, 3)}
    assert {(r.user_id, r.k): pytest.approx(r.ndcg, abs=1e-12) for r in got.collect()} == expected


# ----------------------------------------------------------------------------- the job


@pytest.mark.job
def test_job_on_trec_eval_files_reproduces_trec_eval(spark, data_dir, tmp_path):
    """trec_eval's own test run and qrels, straight from their text, give its ndcg_cut figures."""
    trec = data_dir / "trec_eval"
    out = tmp_path / "out"
    argv = ["--recommendations", str(trec / "results.test"), "--relevance", str(trec / "qrels.test")]
    argv += ["--format", "trec", "--output", str(out), "--k", TREC_CUTOFFS, "--tie-break", "item_descending"]
    assert run(argv) == EXIT_OK
    manifest = json.loads((out / "summary.json").read_text())
    assert manifest["input_rows"] == {"recommendations": 1500, "relevance": 3681}
    expected = trec_expected(trec / "out.test.a", per_topic=False)
    assert len(expected) == 9
    means = {m["k"]: m["mean_ndcg"] for m in manifest["metrics"]}
    assert {k: pytest.approx(means[k], abs=5e-5) for _, k in expected} == {k: v for (_, k), v in expected.items()}
    per_topic = {(r.user_id, r.k): r.ndcg for r in spark.read.parquet(str(out / "per_user")).collect()}
    expected = trec_expected(trec / "out.test.aq", per_topic=True)
    assert {key: pytest.approx(per_topic[key], abs=5e-5) for key in expected} == expected


@pytest.mark.job
def test_job_keeps_leading_zero_keys_and_prints_companion_means(tmp_path, capsys):
    recs, rel = _write(tmp_path / "recs.csv", RECS_CSV), _write(tmp_path / "rel.csv", REL_CSV)
    out = tmp_path / "out"
    argv = ["--recommendations", recs, "--relevance", rel, "--format", "csv", "--output", str(out), "--k", "2"]
    assert run([*argv, "--companion-metrics", "true"]) == EXIT_OK
    metrics = json.loads((out / "summary.json").read_text())["metrics"]
    assert metrics[0]["mean_ndcg"] == pytest.approx(_mean(LISTS, JUDGED, 2), abs=1e-12)
    printed = capsys.readouterr().out.splitlines()
    header, row = printed[0].split(), printed[1].split()
    assert header[-5:] == ["precision", "recall", "ap", "rr", "hit_rate"]
    figures = ["mean_precision", "mean_recall", "mean_ap", "mean_rr", "hit_rate"]
    assert row[-5:] == [f"{metrics[0][c]:.6f}" for c in figures]


@pytest.mark.job
def test_job_mixed_parquet_and_csv_with_a_schema_in_the_config(spark, tmp_path):
    """Recommendations in Parquet with integer users; the judgements a CSV file whose users the
    schema reads as integers, so the two tables join."""
    recs = spark.createDataFrame(
        [(1, "01", 0.9), (1, "1", 0.8), (2, "007", 0.9), (2, "7", 0.5), (2, "70", 0.1)],
        "user_id int, item_id string, score double",
    )
    recs.write.parquet(str(tmp_path / "recs"))
    _write(tmp_path / "rel.csv", REL_CSV)
    config = tmp_path / "job.toml"
    config.write_text(
        'recommendations = "./recs"\nrelevance = "./rel.csv"\noutput = "./out"\nk = [1, 2]\n'
        'relevance_format = "csv"\nrelevance_schema = "user_id int"\n'
    )
    assert run(["--config", str(config)]) == EXIT_OK
    rel = spark.createDataFrame(
        [(1, "1", 1.0), (2, "7", 2.0), (2, "070", 3.0)], "user_id int, item_id string, relevance double"
    )
    assert_df_equality(
        spark.read.parquet(str(tmp_path / "out" / "per_user")),
        evaluate(recs, rel, k=[1, 2]).per_user,
        ignore_row_order=True,
        ignore_nullable=True,
    )
    manifest = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert manifest["settings"]["relevance_format"] == "csv" and manifest["settings"]["format"] == "parquet"
    lists = {int(u): items for u, items in LISTS.items()}
    judged = {int(u): items for u, items in JUDGED.items()}
    assert manifest["metrics"][1]["mean_ndcg"] == pytest.approx(_mean(lists, judged, 2), abs=1e-12)


@pytest.mark.job
def test_a_missing_file_named_without_a_slash_is_said_to_be_taken_for_a_table(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # recs.csv would be a file here, if it existed
    _write(tmp_path / "rel.csv", REL_CSV)
    # The output by its whole path: this process's JVM resolves a relative one against the directory
    # it started in (the checkout, where the README's sample run leaves out/sample), not tmp_path.
    out = str(tmp_path / "out")
    argv = ["--recommendations", "recs.csv", "--relevance", "./rel.csv", "--format", "csv", "--output", out]
    assert run(argv) == EXIT_INPUT
    assert _err_lines(capsys) == [
        "ndcg-spark: error: cannot read recommendations 'recs.csv' as a table: it does not exist; a name without "
        "a '/' is taken for a catalog table: write './recs.csv' for a file"
    ]


@pytest.mark.job
@pytest.mark.parametrize(
    "files, flags, code, words",
    [
        (
            {"recs": "301 0 CR93E-10279 0\n"},
            ["--recommendations-format", "trec"],
            EXIT_INPUT,
            "has 4 columns where a TREC run has 6",
        ),
        (
            {"recs": "user_id,item_id,score\n1,a,0.5\n1,b\n"},
            [],
            EXIT_INPUT,
            "a row whose fields do not match its header",
        ),
        ({"recs": "user_id,item_id,score\n1,a,0.5\n1,b,x\n"}, [], EXIT_INPUT, "column 'score' holds 'x', which is not"),
        (
            {"recs": "1,123,5.362634\n1,124,4.1\n"},
            [],
            EXIT_INPUT,
            "recommendations table has no column 'user_id' (it has: 1, 123, 5.362634); those names look like "
            "values: the file's first line is data, not a header (a CSV file needs a first line naming its "
            "columns, e.g. user_id,item_id,score)",
        ),
        ({}, ["--relevance-format", "xls"], EXIT_CONFIG, "relevance_format = 'xls' is not one of"),
        ({}, ["--user-attributes", "u.csv", "--format", "trec"], EXIT_CONFIG, "user attributes cannot be read as trec"),
        ({}, ["--recommendations-schema", "user_id nope"], EXIT_CONFIG, "schema 'user_id nope' does not parse"),
    ],
)
def test_job_errors_are_one_line_naming_the_cause(tmp_path, capsys, files, flags, code, words):
    recs = _write(tmp_path / "recs", files.get("recs", RECS_CSV))
    rel = _write(tmp_path / "rel", REL_CSV)
    argv = ["--recommendations", recs, "--relevance", rel, "--relevance-format", "csv", "--output", str(tmp_path / "o")]
    assert run([*argv, "--recommendations-format", "csv", *flags]) == code
    err = _err_lines(capsys)
    assert len(err) == 1 and words in err[0], err
    assert not (tmp_path / "o").exists()


@pytest.mark.job
@pytest.mark.parametrize(
    "argv, words",
    [
        (["--gian", "exponential"], "ndcg-spark: error: unrecognized argument --gian (did you mean --gain?)"),
        (["compare", "--candiate", "x"], "unrecognized argument --candiate (did you mean --candidate?)"),
        (["--k"], "ndcg-spark: error: argument --k: expected one argument"),
    ],
)
def test_usage_errors_are_one_line_with_exit_2(capsys, argv, words):
    assert run(argv) == EXIT_CONFIG
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and words in err


@pytest.mark.job
@pytest.mark.parametrize("argv", [["--version"], ["compare", "--version"]])
def test_version(capsys, argv):
    import pyspark

    from ndcg_spark import __version__

    assert run(argv) == EXIT_OK
    assert capsys.readouterr().out.strip() == f"ndcg-spark {__version__} (PySpark {pyspark.__version__})"


@pytest.mark.job
def test_help_shows_the_true_defaults(capsys):
    assert run(["--help"]) == EXIT_OK
    flags = {}
    for line in capsys.readouterr().out.replace("\n                        ", " ").splitlines():
        if line.strip().startswith("--"):
            flags[line.split()[0]] = line
    assert "(default: none)" in flags["--rank-col"] and "(default: all)" in flags["--k"]
    assert flags["--relevance-threshold"].count("(default") == 1 and "relevance > 0" in flags["--relevance-threshold"]
    assert "(default: parquet)" in flags["--format"] and "(default: --format)" in flags["--relevance-format"]


# ----------------------------------------------------------------------------- a fresh process

# The job as users start it, with pyspark's notice about pandas >= 3 raised on the way (pandas 3 is
# not what the suite installs, so its version is set for pyspark's own check).
NOISY_JOB = """
import sys
import warnings
from ndcg_spark.job import cli
parse = cli.parse_config
def parse_with_a_library_notice(*args, **kwargs):
    # As PySpark 4 warns of a pandas newer than it knows, while the job runs.
    warnings.warn("pandas 3.0.0 is newer than this PySpark supports", FutureWarning)
    return parse(*args, **kwargs)
cli.parse_config = parse_with_a_library_notice
sys.exit(cli.run())
"""


def _fresh(tmp_path, *argv):
    proc = subprocess.run(
        [sys.executable, "-c", NOISY_JOB, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    # The JVM's own notice about its incubator modules is printed before Spark starts logging.
    return proc.returncode, [x for x in proc.stderr.splitlines() if not x.startswith("WARNING: Using incubator")]


@pytest.mark.process
def test_fresh_process_read_error_is_one_line(tmp_path):
    csv = _write(tmp_path / "recs.csv", RECS_CSV)
    code, err = _fresh(tmp_path, "--recommendations", csv, "--relevance", csv, "--output", str(tmp_path / "o"))
    assert code == EXIT_INPUT
    assert err == [
        f"ndcg-spark: error: cannot read recommendations {csv!r} as parquet: it is not a Parquet file; its name "
        'ends in .csv: read it with format = "csv" (recommendations_format = "csv" in the job)'
    ]


@pytest.mark.process
def test_fresh_process_library_warnings_only_with_verbose(tmp_path):
    code, err = _fresh(tmp_path, "--gian", "exponential")
    assert code == EXIT_CONFIG and err == ["ndcg-spark: error: unrecognized argument --gian (did you mean --gain?)"]
    code, err = _fresh(tmp_path, "--gian", "exponential", "--verbose")
    assert code == EXIT_CONFIG and any("FutureWarning" in line and "pandas" in line for line in err)
