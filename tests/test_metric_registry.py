"""The metric registry: a beyond-accuracy metric declared once, in this file, is computed, summarised,
shown, recorded, gated and paired by every consumer, none of which names it.

The proof's metric, ``first_item_popularity``: the interaction rows of the list's first item (0 for
a cold one, null for an empty list), SQL over the list's structs. It is registered for each test
only (:func:`ndcg_spark._metrics.registry.registered`), so it leaks into no other test.
"""

from __future__ import annotations

import json
import math
from statistics import NormalDist

import pytest
from chispa import assert_approx_df_equality

from ndcg_spark import ConfigError, EvaluationOptions, compare, evaluate
from ndcg_spark._metrics import registry
from ndcg_spark._metrics.registry import PerUser
from ndcg_spark.compare import beyond_comparison_columns
from ndcg_spark.options import beyond_global, beyond_metric_names, beyond_per_user

NAME = "first_item_popularity"

#: The whole declaration: its name, what it reads, its SQL at a cutoff and what of the structs it reads.
FIRST_ITEM_POPULARITY = PerUser(
    NAME,
    reads=lambda opts: ("interactions",),
    sql=lambda top, k, opts: f"CAST(array_max(transform(slice({top}, 1, 1), x -> x.pop)) AS DOUBLE)",
    parts=lambda opts: ("popularity",),
)

RECS = "user_id,item_id,score\n1,a,2\n1,b,1\n2,c,1\n"
REL = "user_id,item_id,relevance\n1,a,1\n2,c,1\n"
#: a: 3 rows, b: 1; c is cold (0). Lists 1 [a, b] and 2 [c]: first items a (3.0) and c (0.0).
INTER = "user_id,item_id\n1,a\n2,a\n3,a\n3,b\n"
MEAN = 1.5
HALF = NormalDist().inv_cdf(0.975) * math.sqrt(4.5) / math.sqrt(2)  # std_samp of (3, 0), 2 users


@pytest.fixture
def declared():
    with registry.registered(FIRST_ITEM_POPULARITY):
        yield FIRST_ITEM_POPULARITY


@pytest.fixture
def frames(spark):
    def frame(text, schema):
        rows = [line.split(",") for line in text.strip().splitlines()[1:]]
        return spark.createDataFrame([tuple(int(v) if v.isdigit() else v for v in r) for r in rows], schema)

    return {
        "recs": frame(RECS, "user_id long, item_id string, score long"),
        "rel": frame(REL, "user_id long, item_id string, relevance long"),
        "inter": frame(INTER, "user_id long, item_id string"),
    }


def test_the_registry_names_are_what_the_options_accept():
    names = registry.names()
    assert names == beyond_metric_names() == beyond_per_user() + beyond_global()
    assert EvaluationOptions(beyond_accuracy=list(reversed(names))).beyond_accuracy == names
    for name in names:
        assert EvaluationOptions(beyond_accuracy=[name]).beyond_accuracy == (name,)
    with pytest.raises(ConfigError, match=rf"^unknown beyond-accuracy metric {NAME!r}; did you mean 'popularity'\?$"):
        EvaluationOptions(beyond_accuracy=[NAME])
    with registry.registered(FIRST_ITEM_POPULARITY):
        # Read when used: the module's names too (a name imported earlier is the tuple of then).
        assert beyond_per_user()[-1] == NAME and NAME in beyond_metric_names()
        assert EvaluationOptions(beyond_accuracy=[NAME, "novelty"]).beyond_accuracy == ("novelty", NAME)
        with pytest.raises(ValueError, match="declared already"):
            registry.register(FIRST_ITEM_POPULARITY)
    assert registry.names() == names  # forgotten after the block


def test_a_declared_metric_is_in_the_summary_with_its_interval(spark, frames, declared):
    result = evaluate(
        frames["recs"], frames["rel"], k=[2], interactions=frames["inter"], beyond_accuracy=[NAME, "novelty"]
    )
    assert result.beyond == ("novelty", NAME)
    per_user = result.per_user.select("user_id", "k", NAME).orderBy("user_id")
    expected = spark.createDataFrame([(1, 2, 3.0), (2, 2, 0.0)], f"user_id long, k int, {NAME} double")
    assert_approx_df_equality(per_user, expected, 1e-12, ignore_nullable=True)
    summary = result.summary
    assert summary.columns[-6:] == [
        "mean_novelty", "novelty_ci_low", "novelty_ci_high", f"mean_{NAME}", f"{NAME}_ci_low", f"{NAME}_ci_high"
    ]  # fmt: skip
    expected = spark.createDataFrame(
        [(2, MEAN, MEAN - HALF, MEAN + HALF)], f"k int, mean_{NAME} double, {NAME}_ci_low double, {NAME}_ci_high double"
    )
    figures = summary.select("k", f"mean_{NAME}", f"{NAME}_ci_low", f"{NAME}_ci_high")
    assert_approx_df_equality(figures, expected, 1e-12, ignore_nullable=True)


@pytest.mark.job
def test_the_job_shows_records_and_gates_a_declared_metric(spark, tmp_path, capsys, declared):
    from ndcg_spark.job import run
    from ndcg_spark.job.exits import EXIT_CONFIG, EXIT_OK, EXIT_QUALITY_GATE

    for name, text in (("recs", RECS), ("rel", REL), ("inter", INTER)):
        (tmp_path / f"{name}.csv").write_text(text)
    args = ["--recommendations", str(tmp_path / "recs.csv"), "--relevance", str(tmp_path / "rel.csv")]
    args += ["--interactions", str(tmp_path / "inter.csv"), "--format", "csv", "--k", "2"]
    asked = ["--beyond-accuracy", f"{NAME},catalog_coverage"]
    out = tmp_path / "out"
    assert run([*args, *asked, "--output", str(out), "--fail-below", f"{NAME}@2:1.0"]) == EXIT_OK
    header = next(line for line in capsys.readouterr().out.splitlines() if "mean_ndcg" in line)
    assert header.split()[-2:] == [NAME, "catalog_coverage"]
    metrics = json.loads((out / "summary.json").read_text())["metrics"][0]
    assert {c: metrics[c] for c in (f"mean_{NAME}", f"{NAME}_ci_low", f"{NAME}_ci_high")} == pytest.approx(
        {f"mean_{NAME}": MEAN, f"{NAME}_ci_low": MEAN - HALF, f"{NAME}_ci_high": MEAN + HALF}, abs=1e-12
    )
    # Its floor fails as NDCG's does; misspelled, it is refused in one line naming what is known.
    assert run([*args, *asked, "--output", str(tmp_path / "o2"), "--fail-below", f"{NAME}@2:2.0"]) == EXIT_QUALITY_GATE
    capsys.readouterr()
    assert run([*args, "--output", str(tmp_path / "o3"), "--beyond-accuracy", "first_item_popularty"]) == EXIT_CONFIG
    assert f"did you mean {NAME!r}?" in capsys.readouterr().err


def test_compare_pairs_a_declared_metric(spark, frames, declared):
    """Baseline lists 1 [a, b], 2 [c] (3.0, 0.0); candidate 1 [b, c], 2 [a] (1.0, 3.0)."""
    schema = "user_id long, item_id string, score double"
    cand = spark.createDataFrame([(1, "b", 2.0), (1, "c", 1.0), (2, "a", 1.0)], schema)
    result = compare(frames["recs"], cand, frames["rel"], k=[2], beyond_accuracy=[NAME], interactions=frames["inter"])
    assert result.beyond == (NAME,)
    row = result.report()[0]
    assert {c: row[c] for c in (f"{NAME}_pairs", f"mean_{NAME}_baseline", f"mean_{NAME}_candidate")} == {
        f"{NAME}_pairs": 2,
        f"mean_{NAME}_baseline": 1.5,
        f"mean_{NAME}_candidate": 2.0,
    }
    assert row[f"mean_{NAME}_difference"] == pytest.approx(0.5, abs=1e-12)
    assert 0.0 < row[f"{NAME}_p_value"] <= 1.0
    assert [c for c, _ in beyond_comparison_columns(row)] == [
        f"{NAME}_pairs", f"mean_{NAME}_baseline", f"mean_{NAME}_candidate", f"mean_{NAME}_difference",
        f"{NAME}_difference_ci_low", f"{NAME}_difference_ci_high", f"{NAME}_p_value",
    ]  # fmt: skip
