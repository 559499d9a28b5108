"""Beyond accuracy on the bundled MovieLens-small sample, as a new user runs it (docs/conventions.md,
worked example): the job in a fresh process with the defaults, on ``local[2]`` and a 1 GB driver,
the training ratings as shipped (their own columns ``userId``, ``movieId``) as interactions;
against Microsoft Recommenders' ``SparkDiversityEvaluation`` (``recommenders`` 1.2.1) on the same
data in this (warm) session.

Slow tier (``process``): the job starts a JVM of its own, and the two evaluations of the whole
sample take minutes on this machine. One run, every assertion on it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = [pytest.mark.process, pytest.mark.peers]

recommenders = pytest.importorskip("recommenders.evaluation.spark_evaluation")

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "movielens"
K = 20
TOL = 1e-9
#: The worked example's command (docs/conventions.md), less --output.
COMMAND = [
    "--config", str(ROOT / "conf" / "sample.toml"),
    "--interactions", str(SAMPLE / "interactions.csv"),
    "--interactions-schema", "userId int, movieId int",
    "--interactions-user-col", "userId",
    "--interactions-item-col", "movieId",
    "--convention", "recommenders",
    "--beyond-accuracy", "true",
    "--similarity", "cooccurrence",
    "--k", "20",
]  # fmt: skip


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    """The job's run (a fresh process) and Recommenders' figures (this session)."""
    out = tmp_path_factory.mktemp("movielens") / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "ndcg_spark", *COMMAND, "--output", str(out), "--master", "local[2]"]
        + ["--conf", "spark.driver.memory=1g", "--report", "false"],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=out.parent,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]

    # Recommenders: its reco table is the top 20 of each list less the movies its user rated in
    # training (its evaluator refuses those: the preset drops them before the ranking), score
    # descending, item ascending (as the preset orders ties), with the judged relevance (0 when
    # not judged).
    train = spark.read.csv(str(SAMPLE / "interactions.csv"), header=True, schema="userId int, movieId int")
    train = train.selectExpr("userId AS user_id", "movieId AS item_id")
    recs = spark.read.csv(
        str(SAMPLE / "recommendations.csv"), header=True, schema="user_id int, item_id int, score double"
    )
    rel = spark.read.csv(
        str(SAMPLE / "relevance.csv"), header=True, schema="user_id int, item_id int, relevance double"
    )
    recs = recs.join(train, on=["user_id", "item_id"], how="left_anti")
    top = recs.selectExpr(
        "user_id", "item_id", "row_number() OVER (PARTITION BY user_id ORDER BY score DESC, item_id) AS pos"
    ).filter(f"pos <= {K}")
    reco = top.join(rel, on=["user_id", "item_id"], how="left").selectExpr(
        "user_id", "item_id", "coalesce(relevance, 0.0D) AS relevance"
    )
    theirs = recommenders.SparkDiversityEvaluation(
        train, reco, col_user="user_id", col_item="item_id", col_relevance="relevance"
    )
    figures = {
        "catalog_coverage": theirs.catalog_coverage(),
        "distributional_coverage": theirs.distributional_coverage(),
        "mean_novelty": theirs.novelty(),
        "mean_diversity": theirs.diversity(),
        "mean_serendipity": theirs.serendipity(),
    }
    return out, proc, figures


def test_the_five_figures_equal_recommenders_on_the_whole_sample(runs):
    out, _, figures = runs
    row = pd.read_parquet(out / "summary").set_index("k").loc[K]
    assert {name: row[name] for name in figures} == pytest.approx(figures, abs=TOL)


def test_every_table_is_accounted(runs):
    out, proc, _ = runs
    rows = json.loads((out / "summary.json").read_text())["rows"]
    # The interactions (the training ratings): every row read is used.
    assert rows["interactions"] == {"read": 80419, "used": 80419, "set_aside": {}}
    assert "interactions: read 80419 = used 80419" in proc.stdout.splitlines()
    # The lists' 1,533 recommendations of movies their user rated in training are set aside
    # (seen_items = "drop", the preset's): Recommenders' evaluator refuses them.
    recs = rows["recommendations"]
    assert recs["read"] == 12200 and recs["set_aside"]["seen in the user's interactions"] == 1533
