"""Worked examples with published figures (IDCG, DCG, NDCG of small graded lists, a binary NDCG over
playlists), each reproduced by the library."""

from __future__ import annotations

import math

import numpy as np
import pytest
from chispa import assert_approx_df_equality

from ndcg_spark import evaluate
from tests.helpers import PER_USER_SCHEMA, judged, ranked_lists

GROUND_TRUTH = {"A": 0.1, "B": 0.5, "C": 0.7, "D": 0.5, "E": 0.1}


@pytest.fixture(scope="module")
def seed_cases(spark):
    recs = ranked_lists(spark, {1: ["A", "B", "C"], 2: ["D", "A", "C", "B", "E"]})
    rel = judged(spark, {1: GROUND_TRUTH, 2: GROUND_TRUTH})
    return recs, rel


def test_seed_000_and_004_whole_list(spark, seed_cases):
    """k omitted = each user's list length: DCG 0.7654648767857287, NDCG 0.6048882832133625, mean 0.7356022113638424."""
    result = evaluate(*seed_cases)
    expected = spark.createDataFrame(
        [
            (1, None, 1.3, 0.7654648767857287, 1.2654648767857286, 0.6048882832133625, 3, 5),
            (2, None, 1.9, 1.1671165351172963, 1.347217813316522, 0.8663161395143223, 5, 5),
        ],
        PER_USER_SCHEMA,
    )
    assert_approx_df_equality(result.per_user.orderBy("user_id"), expected, precision=1e-12, ignore_nullable=True)
    summary = result.summary.first()
    assert summary.mean_ndcg == pytest.approx(0.7356022113638424, abs=1e-15)
    assert summary.users == 2


def test_seed_004_idcg_of_whole_ground_truth(spark, seed_cases):
    """calc_idcg(ground_truth) = 1.347217813316522: the ideal over all five judged items (k = 5)."""
    row = evaluate(*seed_cases, k=[5]).per_user.filter("user_id = 1").first()
    assert row.idcg == pytest.approx(1.347217813316522, abs=1e-15)
    assert row.dcg == pytest.approx(0.7654648767857287, abs=1e-15)
    # Uncapped (default): a 3-item list is penalised against the 5-item ideal.
    assert row.ndcg == pytest.approx(0.7654648767857287 / 1.347217813316522, abs=1e-15)


def test_seed_004_calc_ndcg_caps_ideal_at_list_length(spark, seed_cases):
    """An NDCG that cuts k at the list length (``calc_ndcg``): cap_ideal_at_list_length reproduces it."""
    capped = evaluate(*seed_cases, k=[5], cap_ideal_at_list_length=True).per_user.orderBy("user_id").collect()
    assert capped[0].ndcg == pytest.approx(0.6048882832133625, abs=1e-15)
    assert (capped[0].ndcg + capped[1].ndcg) / 2 == pytest.approx(0.7356022113638424, abs=1e-15)


def test_seed_000_idcg_example(spark):
    """IDCG@4 of relevances [3, 2, 2, 1] = 5.6925..."""
    recs = ranked_lists(spark, {1: ["a", "b", "c", "d"]})
    rel = judged(spark, {1: {"a": 3, "b": 2, "c": 2, "d": 1}})
    row = evaluate(recs, rel, k=[4]).per_user.first()
    assert row.idcg == pytest.approx(3 + 2 / math.log2(3) + 2 / 2 + 1 / math.log2(5), abs=1e-12)
    assert round(row.idcg, 4) == 5.6925
    assert row.ndcg == pytest.approx(1.0, abs=1e-15)


def test_seed_003_six_documents(spark):
    """Relevances 3, 2, 3, 0, 1, 2: CG 11, DCG 6.861, IDCG 7.141, NDCG 0.961."""
    docs = ["D1", "D2", "D3", "D4", "D5", "D6"]
    recs = ranked_lists(spark, {1: docs})
    rel = judged(spark, {1: dict(zip(docs, [3, 2, 3, 0, 1, 2]))})
    row = evaluate(recs, rel, k=[6]).per_user.first()
    assert row.cg == 11.0
    assert row.dcg == pytest.approx(6.861, abs=1e-3)  # the seed rounds each term
    assert row.idcg == pytest.approx(7.141, abs=1e-3)  # the seed rounds each term
    assert row.ndcg == pytest.approx(0.961, abs=1e-3)  # the seed rounds each term


def test_seed_002_five_items(spark):
    """Relevances 3, 2, 5, 0, 1 at ranks 1-5: DCG@5 7.149, IDCG@5 8.324, NDCG@5 0.859."""
    recs = ranked_lists(spark, {1: ["A", "B", "C", "D", "E"]})
    rel = judged(spark, {1: {"A": 3, "B": 2, "C": 5, "D": 0, "E": 1}})
    row = evaluate(recs, rel, k=[5]).per_user.first()
    assert row.dcg == pytest.approx(7.149, abs=1e-3)  # the seed rounds each term
    assert row.idcg == pytest.approx(8.324, abs=1e-3)  # the seed rounds each term
    assert row.ndcg == pytest.approx(0.859, abs=1e-3)  # the seed rounds each term


def test_seed_001_playlist_ndcg_at_100(spark):
    """A binary NDCG (natural log, ideal cut at min(len(gt), 100)) on random playlists."""

    def seed_001_ndcg(one_gt, one_rec):
        dcg = 0.0
        if len(one_gt) >= 100:
            idcg = sum(1.0 / np.log(i + 1) for i in range(1, 101))
        else:
            idcg = sum(1.0 / np.log(i + 1) for i in range(1, len(one_gt) + 1))
        for i, r in enumerate(one_rec):
            if r in one_gt:
                dcg += 1.0 / np.log(i + 2)
        return dcg / idcg

    rng = np.random.default_rng(1)
    gt, rec = {}, {}
    for playlist in range(30):
        songs = rng.permutation(400)
        gt[playlist] = [int(s) for s in songs[: rng.integers(1, 150)]]
        rec[playlist] = [int(s) for s in rng.permutation(400)[:100]]
    recs = ranked_lists(spark, rec, item_type="int")
    rel = judged(spark, {p: {s: 1 for s in songs} for p, songs in gt.items()}, item_type="int")
    got = {r.user_id: r.ndcg for r in evaluate(recs, rel, k=[100]).per_user.collect()}
    for playlist in gt:
        assert got[playlist] == pytest.approx(seed_001_ndcg(gt[playlist], rec[playlist]), abs=1e-12)
    mean = evaluate(recs, rel, k=[100]).summary.first().mean_ndcg
    assert mean == pytest.approx(sum(seed_001_ndcg(gt[i], rec[i]) for i in rec) / len(rec), abs=1e-12)
