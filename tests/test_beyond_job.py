"""The job reads the beyond-accuracy inputs (--interactions, --items, --baseline-recommendations)
and writes the figures in its summary table."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ndcg_spark.job import run
from ndcg_spark.job.exits import EXIT_CONFIG, EXIT_OK

pytestmark = pytest.mark.job


def test_the_job_reads_interactions_and_writes_novelty_and_coverage(spark, tmp_path, capsys):
    """Interactions a a a b (4 rows): novelty of a is -log2(3/4), of b -log2(1/4); user 1's list
    [a, b] has their mean; the catalog a, b, c (c recommended to user 2) is covered whole at k = 2."""
    (tmp_path / "recs.csv").write_text("user_id,item_id,score\n1,a,2\n1,b,1\n2,c,1\n")
    (tmp_path / "rel.csv").write_text("user_id,item_id,relevance\n1,a,1\n2,c,1\n")
    (tmp_path / "inter.csv").write_text("user_id,item_id\n1,a\n2,a\n3,a\n3,b\n")
    out = tmp_path / "out"
    args = ["--recommendations", str(tmp_path / "recs.csv"), "--relevance", str(tmp_path / "rel.csv")]
    args += ["--interactions", str(tmp_path / "inter.csv"), "--format", "csv", "--k", "2", "--output", str(out)]
    assert run([*args, "--beyond-accuracy", "novelty,catalog_coverage"]) == EXIT_OK
    summary = pd.read_parquet(out / "summary")
    user_1 = (-math.log2(3 / 4) - math.log2(1 / 4)) / 2
    user_2 = -math.log2(1 / 4)  # c is cold: counted as interacted once
    assert summary["mean_novelty"].tolist() == pytest.approx([(user_1 + user_2) / 2], abs=1e-12)
    assert summary["catalog_coverage"].tolist() == [1.0]
    # The console's table shows them beside NDCG; summary.json's metrics carry them.
    header = next(line for line in capsys.readouterr().out.splitlines() if "mean_ndcg" in line)
    assert header.split()[-2:] == ["novelty", "catalog_coverage"]
    import json

    metrics = json.loads((out / "summary.json").read_text())["metrics"]
    assert metrics[0]["catalog_coverage"] == 1.0 and metrics[0]["mean_novelty"] == pytest.approx((user_1 + user_2) / 2)
    # A metric whose input is missing: one line naming it, the configuration's exit code.
    no_items = ["--recommendations", str(tmp_path / "recs.csv"), "--relevance", str(tmp_path / "rel.csv")]
    no_items += ["--format", "csv", "--output", str(tmp_path / "out2"), "--beyond-accuracy", "category_diversity"]
    assert run(no_items) == EXIT_CONFIG


def test_gates_hold_a_beyond_accuracy_figure_and_refuse_one_the_run_cannot_give(spark, tmp_path, capsys):
    """``metric@k:amount`` gates a beyond-accuracy figure: a floor on the catalog coverage (1.0)
    and on mean novelty (about 1.60 bits, an amount above 1 allowed) holds, exit 0; a floor of 3
    bits on novelty fails, exit 4, its line naming the figure. Refused in one line before any
    computing, exit 2: gini_index (lower is better), a metric the run does not compute, a global
    figure in the drop gate (it pairs users), and a bare amount above 1 (NDCG's)."""
    from ndcg_spark.job.exits import EXIT_QUALITY_GATE

    (tmp_path / "recs.csv").write_text("user_id,item_id,score\n1,a,2\n1,b,1\n2,c,1\n")
    (tmp_path / "rel.csv").write_text("user_id,item_id,relevance\n1,a,1\n2,c,1\n")
    (tmp_path / "inter.csv").write_text("user_id,item_id\n1,a\n2,a\n3,a\n3,b\n")
    args = ["--recommendations", str(tmp_path / "recs.csv"), "--relevance", str(tmp_path / "rel.csv")]
    args += ["--interactions", str(tmp_path / "inter.csv"), "--format", "csv", "--k", "2"]
    args += ["--beyond-accuracy", "novelty,catalog_coverage"]
    mean_novelty = ((-math.log2(3 / 4) - math.log2(1 / 4)) / 2 - math.log2(1 / 4)) / 2
    capsys.readouterr()
    held = run([*args, "--output", str(tmp_path / "a"), "--fail-below", "catalog_coverage@2:0.9,novelty@2:1.5"])
    assert held == EXIT_OK
    assert f"quality gate passed: mean novelty@2 = {mean_novelty:.6f} is at least 1.5" in capsys.readouterr().out
    # The report draws catalog coverage against k and the exposure curve (catalog a, b, c ranked a, b, c).
    page = (tmp_path / "a" / "report.html").read_text()
    assert 'id="coverage-curve"' in page and 'id="exposure-curve"' in page
    assert "share of interactions, ranks 3-3 (1 items): 0.0000" in page
    failed = run([*args, "--output", str(tmp_path / "b"), "--fail-below", "2:0.1,novelty@2:3"])
    assert failed == EXIT_QUALITY_GATE
    err = capsys.readouterr().err.strip().splitlines()
    assert f"quality gate failed: mean novelty@2 = {mean_novelty:.6f} is below 3.0 (outputs were written)" in err[-1]
    import json

    manifest = json.loads((tmp_path / "b" / "summary.json").read_text())
    recorded = manifest["quality_gates"]
    assert [(g["gate"], g.get("metric"), g["passed"]) for g in recorded] == [
        ("2:0.1", None, True),
        ("novelty@2:3", "novelty", False),
    ]
    assert recorded[1]["mean_novelty"] == pytest.approx(mean_novelty, abs=1e-12)
    # Read back (history, the report of a published run): the figure and its value as recorded.
    from ndcg_spark.job.gates.wording import gate_lines
    from ndcg_spark.job.result import RunResult, gates_summary

    again = RunResult.from_json(manifest)
    assert gates_summary(again) == "failed: floor:novelty@2"
    assert gate_lines(again)[1] == (False, f"quality gate failed: mean novelty@2 = {mean_novelty:.6f} is below 3.0")
    refused = {
        "gini_index@2:0.5": "cannot hold gini_index: it measures concentration (lower is better)",
        "diversity@2:0.5": "names diversity, which this run does not compute",
        "2:1.5": "fail_below = '2:1.5'",
    }
    for gate, words in refused.items():
        assert run([*args, "--output", str(tmp_path / "c"), "--fail-below", gate]) == EXIT_CONFIG, gate
        assert words in capsys.readouterr().err, gate
    drop = ["--run-date", "2026-11-21", "--fail-if-drop", "catalog_coverage@2:0.1"]
    assert run([*args, "--output", str(tmp_path / "c"), *drop]) == EXIT_CONFIG
    assert "fail_if_drop cannot hold catalog_coverage: it pairs users" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_the_drop_gate_pairs_a_per_user_beyond_accuracy_metric(spark):
    """``--fail-if-drop novelty@5:0.1``: tonight's novelty paired with the previous run's by user
    (a user without a value on a side left out); it fell by 0.5 for both users in common, with no
    spread, so the drop is sure and the gate fails; NDCG, unchanged, passes."""
    from ndcg_spark.job.config.gate_specs import parse_gates
    from ndcg_spark.job.gates.regression import regression_gate

    schema = "user_id int, k int, ndcg double, novelty double"
    previous = spark.createDataFrame([(1, 5, 0.5, 2.0), (2, 5, 0.5, 3.0), (3, 5, 0.5, None)], schema)
    current = spark.createDataFrame([(1, 5, 0.5, 1.5), (2, 5, 0.5, 2.5), (3, 5, 0.5, 9.0)], schema)
    gates = parse_gates("drop", "novelty@5:0.1,5:0.1", computed=("novelty",))
    outcome = regression_gate("2026-11-20", previous, "2026-11-21", current, gates, (), "user_id")
    novelty, ndcg = outcome.checked
    assert (novelty.passed, novelty.users, novelty.mean_previous, novelty.mean, novelty.mean_difference) == (
        False,
        2,
        2.5,
        2.0,
        -0.5,
    )
    assert (ndcg.passed, ndcg.users, ndcg.mean_difference) == (True, 3, 0.0)
    assert outcome.message.startswith("regression gate failed: run_date 2026-11-20 -> 2026-11-21, novelty@5: 2 users")


def test_compare_command_pairs_the_beyond_accuracy_metrics_as_the_library_does(spark, tmp_path, capsys):
    """``ndcg-spark compare`` reads --interactions as evaluate does: per user and k its paired
    novelty and unseen_share are the library's ``compare`` on the same tables (user 3, in the
    candidate only, has no baseline novelty: no pair), and comparison.json, the comparison table
    and the console carry their paired figures. A metric whose input is missing is one line
    naming it, exit 2; the non-inferiority gate stays NDCG's: a beyond metric there is exit 2."""
    import json

    from chispa import assert_df_equality

    from ndcg_spark import compare

    files = {
        "base.csv": "user_id,item_id,score\n1,a,2\n1,b,1\n2,c,1\n",
        "cand.csv": "user_id,item_id,score\n1,c,2\n1,a,1\n2,b,1\n3,a,1\n",
        "rel.csv": "user_id,item_id,relevance\n1,a,1\n2,c,1\n3,a,1\n",
        "inter.csv": "user_id,item_id\n1,a\n2,a\n3,a\n3,b\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    out = tmp_path / "out"
    args = ["compare", "--recommendations", str(tmp_path / "base.csv"), "--candidate", str(tmp_path / "cand.csv")]
    args += ["--relevance", str(tmp_path / "rel.csv"), "--format", "csv", "--k", "2"]
    beyond = ["--interactions", str(tmp_path / "inter.csv"), "--beyond-accuracy", "novelty,unseen_share"]
    capsys.readouterr()
    assert run([*args, *beyond, "--output", str(out)]) == EXIT_OK
    printed = capsys.readouterr().out
    assert "novelty_difference" in printed and "unseen_share_p_value" in printed

    def csv(name):
        schema = "user_id string, item_id string, score double"
        if name == "rel.csv":
            schema = "user_id string, item_id string, relevance double"
        if name == "inter.csv":
            schema = "user_id string, item_id string"
        return spark.read.csv(str(tmp_path / name), header=True, schema=schema)

    library = compare(
        csv("base.csv"), csv("cand.csv"), csv("rel.csv"), k=[2], interactions=csv("inter.csv"),
        beyond_accuracy=["novelty", "unseen_share"],
    )  # fmt: skip
    written = spark.read.parquet(str(out / "per_user"))
    assert_df_equality(
        written.select(*library.per_user.columns),
        library.per_user,
        ignore_row_order=True,
        ignore_nullable=True,
    )
    expected = library.report()
    rows = json.loads((out / "comparison.json").read_text())["comparison"]
    table = [r.asDict() for r in spark.read.parquet(str(out / "comparison")).collect()]
    for name in ("novelty", "unseen_share"):
        for column in (f"{name}_pairs", f"mean_{name}_difference", f"std_{name}_difference", f"{name}_p_value"):
            assert [r[column] for r in rows] == [r[column] for r in expected] == [r[column] for r in table], column
    assert rows[0]["novelty_pairs"] == 2
    assert "<th>mean_novelty_difference</th>" in (out / "report.html").read_text()
    # A metric whose input is missing: one line naming it.
    capsys.readouterr()
    missing = [*args, "--beyond-accuracy", "novelty", "--output", str(tmp_path / "o2")]
    assert run(missing) == EXIT_CONFIG
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "interactions" in err[0]
    worse = [*args, *beyond, "--output", str(tmp_path / "o3"), "--fail-if-worse", "novelty@2:0.1"]
    assert run(worse) == EXIT_CONFIG
    assert "fail_if_worse cannot hold novelty: it holds NDCG" in capsys.readouterr().err


def test_tables_named_as_their_systems_name_them_are_read_and_accounted(spark, tmp_path, capsys):
    """Interactions, items and a baseline each with their own user and item columns, mapped by
    their flags: the run's figures equal a run of the same tables under the contract's names,
    and each table is in the row accounting (console and summary.json): read = used + set aside,
    the baseline's third recommendation of user 1 beyond k = 2. A named column the table lacks:
    one line naming the flag's option, exit 3."""
    import json

    from ndcg_spark.job.exits import EXIT_INPUT

    (tmp_path / "recs.csv").write_text("user_id,item_id,score\n1,a,2\n1,b,1\n2,c,1\n")
    (tmp_path / "rel.csv").write_text("user_id,item_id,relevance\n1,a,1\n2,c,1\n")
    (tmp_path / "inter.csv").write_text("user_id,item_id\n1,a\n2,a\n3,a\n3,b\n3,c\n")
    (tmp_path / "items.csv").write_text("item_id,category\na,x\nb,y\nc,x\nd,y\n")
    (tmp_path / "base.csv").write_text("user_id,item_id,score\n1,b,3\n1,d,2\n1,a,1\n2,c,1\n")
    (tmp_path / "inter_own.csv").write_text("userId,movieId,rating\n1,a,4\n2,a,4\n3,a,4\n3,b,4\n3,c,4\n")
    (tmp_path / "items_own.csv").write_text("movieId,category\na,x\nb,y\nc,x\nd,y\n")
    (tmp_path / "base_own.csv").write_text("uid,mid,score\n1,b,3\n1,d,2\n1,a,1\n2,c,1\n")
    common = ["--recommendations", str(tmp_path / "recs.csv"), "--relevance", str(tmp_path / "rel.csv")]
    common += ["--format", "csv", "--k", "2", "--beyond-accuracy", "true", "--item-category-col", "category"]

    def tables(suffix):
        return ["--interactions", str(tmp_path / f"inter{suffix}.csv"), "--items", str(tmp_path / f"items{suffix}.csv")]

    own = [*tables("_own"), "--baseline-recommendations", str(tmp_path / "base_own.csv")]
    own += ["--interactions-user-col", "userId", "--interactions-item-col", "movieId", "--items-item-col", "movieId"]
    own += ["--baseline-user-col", "uid", "--baseline-item-col", "mid"]
    named = [*tables(""), "--baseline-recommendations", str(tmp_path / "base.csv")]
    assert run([*common, *named, "--output", str(tmp_path / "named")]) == EXIT_OK
    capsys.readouterr()
    assert run([*common, *own, "--output", str(tmp_path / "own")]) == EXIT_OK
    out = capsys.readouterr().out
    expected = pd.read_parquet(tmp_path / "named" / "summary")
    assert {"mean_novelty", "mean_diversity", "mean_unexpectedness", "catalog_coverage"} <= set(expected.columns)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "own" / "summary"), expected)
    rows = json.loads((tmp_path / "own" / "summary.json").read_text())["rows"]
    assert rows["interactions"] == {"read": 5, "used": 5, "set_aside": {}}
    assert rows["items"] == {"read": 4, "used": 4, "set_aside": {}}
    assert rows["baseline_recommendations"] == {"read": 4, "used": 3, "set_aside": {"beyond the largest k": 1}}
    assert "interactions: read 5 = used 5" in out.splitlines()
    assert "baseline_recommendations: read 4 = used 3 + beyond the largest k 1" in out.splitlines()
    # A named column the table does not have: one line, the input's exit code.
    wrong = [*common, *tables("_own"), "--interactions-user-col", "user", "--interactions-item-col", "movieId"]
    wrong += ["--items-item-col", "movieId", "--output", str(tmp_path / "wrong")]
    assert run(wrong) == EXIT_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "ndcg-spark: error: interactions table has no column 'user', which interactions_user_col names "
        "(it has: userId, movieId, rating)"
    )


def test_tables_read_by_the_global_figures_alone_are_accounted_and_the_run_ends(spark, tmp_path):
    """Interactions and items read only by catalog coverage (no per-user metric reads them): the
    run ends, exit 0, each table read = used in summary.json. Their counts are passes of their
    own: an observation on a table the global figures alone read is never reported, and waiting
    for it waited for ever (the run is watched from another thread, so a wait fails the test)."""
    import json
    import threading

    (tmp_path / "recs.csv").write_text("user_id,item_id,score\n1,a,2\n1,b,1\n2,c,1\n")
    (tmp_path / "rel.csv").write_text("user_id,item_id,relevance\n1,a,1\n2,c,1\n")
    (tmp_path / "inter.csv").write_text("user_id,item_id\n1,a\n2,a\n3,a\n3,b\n")
    (tmp_path / "items.csv").write_text("item_id,category\na,x\nb,y\nc,x\nd,y\n")
    args = ["--recommendations", str(tmp_path / "recs.csv"), "--relevance", str(tmp_path / "rel.csv")]
    args += ["--interactions", str(tmp_path / "inter.csv"), "--items", str(tmp_path / "items.csv")]
    args += ["--format", "csv", "--k", "2", "--beyond-accuracy", "catalog_coverage", "--output", str(tmp_path / "out")]
    ended = {}
    runner = threading.Thread(target=lambda: ended.setdefault("rc", run(args)), daemon=True)
    runner.start()
    runner.join(240)
    assert ended == {"rc": EXIT_OK}, "the run did not end within 4 minutes"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["rows"]["interactions"] == {"read": 4, "used": 4, "set_aside": {}}
    assert summary["rows"]["items"] == {"read": 4, "used": 4, "set_aside": {}}
    assert summary["metrics"][0]["catalog_coverage"] == 3 / 4  # a, b, c of the catalog a, b, c, d
