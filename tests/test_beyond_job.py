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
