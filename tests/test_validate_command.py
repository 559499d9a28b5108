"""``ndcg-spark validate``: the inputs checked with the run's own flags, every problem listed with
its count and examples (exit 3), or the run's row accounting (exit 0); nothing written."""

from __future__ import annotations

import json

import pytest

from ndcg_spark.job import run
from ndcg_spark.job.exits import EXIT_INPUT, EXIT_OK

pytestmark = pytest.mark.job  # the job's tests: left out of the library's loop (CONTRIBUTING.md)


@pytest.fixture
def tables(tmp_path):
    """Recommendations with two null scores and a NaN; relevance with a negative grade."""
    (tmp_path / "recs.csv").write_text("user_id,item_id,score\n1,a,0.9\n1,b,\n2,a,NaN\n2,c,0.5\n3,a,\n3,b,0.2\n")
    (tmp_path / "rel.csv").write_text("user_id,item_id,relevance\n1,a,2\n2,c,-1\n3,b,1\n")
    flags = ["--recommendations", str(tmp_path / "recs.csv"), "--relevance", str(tmp_path / "rel.csv")]
    return [*flags, "--format", "csv", "--recommendations-schema", "user_id int, item_id string, score double",
            "--relevance-schema", "user_id int, item_id string, relevance double", "--k", "2"]  # fmt: skip


def test_validate_lists_every_problem_with_counts_and_examples(tables, tmp_path, capsys):
    assert run(["validate", *tables, "--output", str(tmp_path / "out")]) == EXIT_INPUT
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[:-1] == [
        "problem: recommendations column 'score' is null in 2 rows, e.g. user_id=1/item_id=b, user_id=3/item_id=a",
        "problem: recommendations column 'score' is NaN or infinite in 1 row, e.g. user_id=2/item_id=a",
        "problem: relevance column 'relevance' is negative (set negative_relevance = \"clip\" to read it as 0) "
        "in 1 row, e.g. user_id=2/item_id=c",
    ]
    record = json.loads(lines[-1])
    assert record["command"] == "validate" and record["status"] == "invalid_input" and len(record["problems"]) == 3
    assert captured.err.splitlines() == [
        "ndcg-spark: error: 3 problems in the input tables (listed above); validate wrote nothing"
    ]
    assert not (tmp_path / "out").exists()


def test_validate_gives_the_row_accounting_the_run_would_publish(tables, tmp_path, capsys):
    """Under quarantine the problems are the rows the run sets aside: listed, and counted."""
    assert run(["validate", *tables, "--on-invalid-rows", "quarantine", "--negative-relevance", "clip"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[:-1] == [
        "problem: recommendations column 'score' is null in 2 rows, e.g. user_id=1/item_id=b, user_id=3/item_id=a",
        "problem: recommendations column 'score' is NaN or infinite in 1 row, e.g. user_id=2/item_id=a",
        "recommendations: read 6 = used 3 + invalid: bad_score 1, invalid: null_score 2",
        "relevance: read 3 = used 3",
    ]
    record = json.loads(lines[-1])
    assert record["status"] == "ok" and record["rows"]["recommendations"]["used"] == 3
    assert not list(tmp_path.glob("*/_ndcg_spark"))


def test_validate_help_names_validate_and_takes_the_runs_flags(capsys):
    assert run(["validate", "--help"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("usage: ndcg-spark validate [-h]") and "Writes nothing." in out
    assert "--recommendations RECOMMENDATIONS" in out and "--k " in out


def test_validate_checks_the_beyond_accuracy_tables_by_the_runs_rules(tmp_path, capsys):
    """With --interactions and --items, validate holds them to evaluate's row rules (a null item;
    an item listed twice, a feature vector holding a NaN or shorter than the longest) and counts
    the interactions naming an item the items table lacks (z): a note, not a problem."""
    import pandas as pd

    (tmp_path / "recs.csv").write_text("user_id,item_id,score\n1,a,0.9\n1,b,0.5\n2,c,0.5\n")
    (tmp_path / "rel.csv").write_text("user_id,item_id,relevance\n1,a,2\n2,c,1\n")
    (tmp_path / "inter.csv").write_text("user_id,item_id\n1,a\n2,\n3,z\n3,a\n")
    items = pd.DataFrame(
        {
            "item_id": ["a", "b", "b", "c", "d"],
            "features": [[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, float("nan")], [1.0]],
        }
    )
    items.to_parquet(tmp_path / "items.parquet")
    flags = ["--recommendations", str(tmp_path / "recs.csv"), "--relevance", str(tmp_path / "rel.csv")]
    flags += ["--format", "csv", "--k", "2", "--interactions", str(tmp_path / "inter.csv")]
    flags += [
        "--items",
        str(tmp_path / "items.parquet"),
        "--items-format",
        "parquet",
        "--item-features-col",
        "features",
    ]
    assert run(["validate", *flags]) == EXIT_INPUT
    lines = capsys.readouterr().out.splitlines()
    assert lines[:-1] == [
        "problem: interactions column 'item_id' is null in 1 row, e.g. user_id=2/item_id=null",
        "problem: items column 'item_id' lists an item more than once in 2 rows, e.g. item_id=b",
        "problem: items column 'features' holds a null or NaN in 1 row, e.g. item_id=c",
        "problem: items column 'features' differs in length from the longest vector of the table in 1 row, "
        "e.g. item_id=d",
        "note: interactions: 1 rows name an item the items table lacks (counted; the run goes on)",
    ]
    record = json.loads(lines[-1])
    assert record["unknown_items"] == {"interactions": 1} and len(record["problems"]) == 4
