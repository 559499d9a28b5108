"""Segments, confidence intervals, companion metrics, tie averaging and ALS output."""

from __future__ import annotations

import numpy as np
import pytest
import pytrec_eval
from chispa import assert_approx_df_equality, assert_df_equality
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from sklearn.metrics import ndcg_score

from ndcg_spark import EvaluationOptions, evaluate
from ndcg_spark._stages import scoring as _scoring
from tests.helpers import frames, random_graded


@pytest.fixture(scope="module")
def graded(spark):
    recs, rels = random_graded(seed=21, users=40)
    return recs, rels, frames(spark, recs, rels)


@pytest.fixture(scope="module")
def plain(graded):
    """One evaluation of ``graded`` without segments at every cutoff the tests below read, its
    frames kept (localCheckpoint): the separate run, the plain per-user figures and the normal
    interval they are held to."""
    _, _, (recs, rel) = graded
    result = evaluate(recs, rel, k=[3, 5, 10])
    return result.per_user.localCheckpoint(), result.summary.localCheckpoint()


# ----------------------------------------------------------------------------- segments


def test_group_by_a_recommendations_column_equals_separate_runs(spark, graded, plain):
    _, _, (recs, rel) = graded
    models = recs.withColumn("model", F.lit("a")).unionByName(
        recs.withColumn("model", F.lit("b")).withColumn("score", -F.col("score"))
    )
    both = evaluate(models, rel, k=[3, 10], group_by=["model"])
    assert both.per_user.columns[:2] == ["model", "user_id"]
    # Model a's rows are ``recs`` as they are: its separate run is the plain one (at k 3 and 10).
    b = evaluate(models.filter(F.col("model") == "b").drop("model"), rel, k=[3, 10])
    a = [frame.filter(F.col("k").isin(3, 10)) for frame in plain]
    for model, (per_user, summary) in (("a", a), ("b", (b.per_user, b.summary))):
        assert_df_equality(
            both.per_user.filter(F.col("model") == model).drop("model").orderBy("user_id", "k"),
            per_user.orderBy("user_id", "k"),
        )
        assert_approx_df_equality(
            both.summary.filter(F.col("model") == model).drop("model"), summary.orderBy("k"), precision=1e-12
        )


def test_group_by_a_user_attribute(spark, graded, plain):
    _, _, (recs, rel) = graded
    attributes = spark.createDataFrame([(u, "kr" if u % 3 else "cn") for u in range(40)], "user_id int, country string")
    result = evaluate(recs, rel, k=[5], group_by=["country"], user_attributes=attributes)
    summary = {r.country: r for r in result.summary.collect()}
    per_user = plain[0].filter("k = 5").join(attributes, "user_id")
    for country in ("kr", "cn"):
        subset = [r.ndcg for r in per_user.filter(F.col("country") == country).collect()]
        assert summary[country].users == len(subset)
        assert summary[country].mean_ndcg == pytest.approx(sum(subset) / len(subset), abs=1e-12)


def test_a_user_repeated_in_the_attributes_is_an_input_error(spark, graded):
    # Joined as it is, user 3's figures would count twice (once per attribute row).
    _, _, (recs, rel) = graded
    attributes = spark.createDataFrame([(u, "kr") for u in range(40)] + [(3, "cn")], "user_id int, country string")
    result = evaluate(recs, rel, k=[5], group_by=["country"], user_attributes=attributes)
    for frame in (result.per_user, result.summary):
        with pytest.raises((PySparkException, Py4JJavaError)) as info:
            frame.collect()
        assert "user attributes table has more than one row for user_id=3" in str(info.value)


# ----------------------------------------------------------------------------- intervals


def test_normal_interval_brackets_the_mean(plain):
    row = plain[1].filter("k = 10").first()
    half = 1.959963984540054 * row.std_ndcg / np.sqrt(row.users)
    assert (row.ndcg_ci_low, row.ndcg_ci_high) == pytest.approx((row.mean_ndcg - half, row.mean_ndcg + half), abs=1e-12)


def test_bootstrap_interval_is_seeded_and_partition_independent(spark, graded, plain):
    _, _, (recs, rel) = graded
    options = dict(k=[10], confidence_interval="bootstrap", bootstrap_samples=300, seed=7)
    first = evaluate(recs, rel, **options).summary.first()
    again = evaluate(recs.repartition(5), rel.repartition(3), **options).summary.first()
    assert (first.ndcg_ci_low, first.ndcg_ci_high) == (again.ndcg_ci_low, again.ndcg_ci_high)
    assert first.ndcg_ci_low < first.mean_ndcg < first.ndcg_ci_high
    # Close to the normal interval for 40 users.
    normal = plain[1].filter("k = 10").first()
    assert first.ndcg_ci_high - first.ndcg_ci_low == pytest.approx(normal.ndcg_ci_high - normal.ndcg_ci_low, rel=0.35)
    other_seed = evaluate(recs, rel, **{**options, "seed": 8}).summary.first()
    assert other_seed.ndcg_ci_low != first.ndcg_ci_low


def test_bootstrap_interval_of_a_tiny_group(spark):
    # With 3 users some replicates draw weight 0 for all of them (about 1 in 20): no mean there.
    recs = spark.createDataFrame([(u, "a", 0.9) for u in range(3)], "user_id int, item_id string, score double")
    rel = spark.createDataFrame([(u, "a", float(u)) for u in range(3)], "user_id int, item_id string, relevance double")
    row = evaluate(recs, rel, k=[1], confidence_interval="bootstrap", bootstrap_samples=200, seed=1).summary.first()
    assert row.users == 3 and row.mean_ndcg == pytest.approx(2 / 3)
    assert 0.0 <= row.ndcg_ci_low <= row.mean_ndcg <= row.ndcg_ci_high <= 1.0


def test_bootstrap_interval_for_every_cutoff_and_the_whole_list(spark, graded):
    # The whole list's k is null, and a null key joins nothing: its interval must still be there.
    _, _, (recs, rel) = graded
    options = dict(k=[10, None], confidence_interval="bootstrap", bootstrap_samples=200, seed=7)
    rows = evaluate(recs, rel, **options).summary.collect()
    assert [r.k for r in rows] == [10, None]
    for row in rows:
        assert row.ndcg_ci_low is not None and row.ndcg_ci_low < row.mean_ndcg < row.ndcg_ci_high
    alone = evaluate(recs, rel, **{**options, "k": [None]}).summary.first()
    assert (alone.ndcg_ci_low, alone.ndcg_ci_high) == (rows[1].ndcg_ci_low, rows[1].ndcg_ci_high)


# ----------------------------------------------------------------------------- companion metrics


def test_companion_metrics_match_trec_eval(spark):
    recs, rels = random_graded(seed=5, users=30)
    cutoffs = [1, 5, 10, 20]
    measures = {
        "P." + ",".join(map(str, cutoffs)),
        "recall." + ",".join(map(str, cutoffs)),
        "map_cut." + ",".join(map(str, cutoffs)),
        "recip_rank",
    }
    trec = pytrec_eval.RelevanceEvaluator({str(u): m for u, m in rels.items()}, measures).evaluate(
        {str(u): m for u, m in recs.items()}
    )
    result = evaluate(
        *frames(spark, recs, rels), k=[*cutoffs, None], companion_metrics=True, tie_break="item_descending"
    )
    rows = []
    for u in recs:
        for k in cutoffs:
            t = trec[str(u)]
            rows.append((u, k, t[f"P_{k}"], t[f"recall_{k}"], t[f"map_cut_{k}"]))
    expected = spark.createDataFrame(rows, "user_id int, k int, precision double, recall double, ap double")
    got = result.per_user.filter("k is not null").select("user_id", "k", "precision", "recall", "ap")
    assert_approx_df_equality(
        got.orderBy("user_id", "k"), expected.orderBy("user_id", "k"), precision=1e-9, ignore_nullable=True
    )
    rr = {r.user_id: r.rr for r in result.per_user.filter("k is null").collect()}
    for u in recs:
        assert rr[u] == pytest.approx(trec[str(u)]["recip_rank"], abs=1e-9)


def test_companion_metrics_match_ranking_evaluator_on_binary_data(spark):
    from pyspark.ml.evaluation import RankingEvaluator

    recs, rels = random_graded(seed=9, users=30)
    rels = {u: {i: int(r > 2) for i, r in m.items()} for u, m in rels.items()}
    rec_df, rel_df = frames(spark, recs, rels)
    ours = {r.k: r for r in evaluate(rec_df, rel_df, k=[5, 10, None], companion_metrics=True).summary.collect()}
    rows = []
    for u, scored in recs.items():
        ranked = [float(i[1:]) for i in sorted(scored, key=lambda i: (-scored[i], i))]
        labels = [float(i[1:]) for i, r in rels[u].items() if r > 0]
        rows.append((ranked, labels))
    df = spark.createDataFrame(rows, "prediction array<double>, label array<double>")
    for metric, k, ours_value in [
        ("precisionAtK", 5, ours[5].mean_precision),
        ("recallAtK", 10, ours[10].mean_recall),
        ("ndcgAtK", 10, ours[10].mean_ndcg),
        ("meanAveragePrecision", 10, ours[None].mean_ap),
    ]:
        spark_value = RankingEvaluator(metricName=metric, k=k).evaluate(df)
        assert ours_value == pytest.approx(spark_value, abs=1e-9), metric


@pytest.mark.job
def test_each_companion_metric_is_averaged_and_shown_everywhere(spark):
    """Every metric of the registry has its per-user column, its mean over the included users in
    the summary (checked against the per-user figures averaged here), a column of the report's
    table, a header of the console's and a metric of MLflow's."""
    from ndcg_spark._metrics.accuracy import COMPANIONS
    from ndcg_spark.job.commands.tracking import metric_rows
    from ndcg_spark.job.console import format_summary
    from ndcg_spark.job.result import RunResult
    from ndcg_spark.report import render

    recs, rels = random_graded(seed=3, users=12)
    result = evaluate(*frames(spark, recs, rels), k=[2, None], companion_metrics=True, zero_idcg="exclude")
    per_user = [r.asDict() for r in result.per_user.collect()]
    summary = [r.asDict() for r in result.summary.collect()]
    page = render(summary, [])
    console = format_summary(summary).splitlines()[0].split()
    logged = {name for name, _ in metric_rows(RunResult("evaluate", metrics=tuple(summary)))}
    for metric in COMPANIONS:
        for row in summary:
            values = [u[metric.name] for u in per_user if u["k"] == row["k"]]
            assert row[metric.summary] == pytest.approx(sum(values) / len(values), abs=1e-12), metric.name
        assert f"<th>{metric.summary}</th>" in page
        assert metric.header in console
        assert {f"{metric.summary}_at_2", f"{metric.summary}_at_all"} <= logged


def test_relevance_threshold(spark):
    recs = spark.createDataFrame(
        [(1, "a", 3.0), (1, "b", 2.0), (1, "c", 1.0)], "user_id int, item_id string, score double"
    )
    rel = spark.createDataFrame(
        [(1, "a", 1.0), (1, "b", 4.0), (1, "c", 5.0)], "user_id int, item_id string, relevance double"
    )
    row = evaluate(recs, rel, k=[1, 3], companion_metrics=True, relevance_threshold=4).per_user.orderBy("k").collect()
    assert (row[0].precision, row[0].rr, row[0].hit) == (0.0, 0.0, 0.0)
    assert (row[1].precision, row[1].recall, row[1].rr) == pytest.approx((2 / 3, 1.0, 0.5))
    assert row[1].ap == pytest.approx((1 / 2 + 2 / 3) / 2)


# ----------------------------------------------------------------------------- tie averaging


TIE_CUTOFFS = (1, 3, 7, 25)


@pytest.fixture(scope="module")
def tied(spark):
    """Lists with tied scores and their tie-averaged NDCG, {k: {user: NDCG@k}}, from one evaluation at every cutoff."""
    recs, rels = random_graded(seed=13, users=30, ties=True)
    ndcg = {k: {} for k in TIE_CUTOFFS}
    for r in evaluate(*frames(spark, recs, rels), k=list(TIE_CUTOFFS), ties="average").per_user.collect():
        ndcg[r.k][r.user_id] = r.ndcg
    return recs, rels, ndcg


@pytest.mark.parametrize("k", TIE_CUTOFFS)
def test_tie_averaging_matches_scikit_learn(tied, k):
    recs, rels, ndcg = tied
    got = ndcg[k]
    assert set(got) == set(recs)
    for u, scored in recs.items():
        universe = sorted(set(scored) | set(rels[u]))
        # Unrecommended judged items rank below every recommendation, and are not tied with them.
        y_score = np.array([[scored.get(i, -1.0 - j) for j, i in enumerate(universe)]])
        y_true = np.array([[rels[u].get(i, 0) for i in universe]], dtype=float)
        expected = 0.0 if not y_true.any() else ndcg_score(y_true, y_score, k=k)
        assert got[u] == pytest.approx(expected, abs=1e-9), u


def test_tie_averaging_changes_only_tied_lists(spark):
    recs = spark.createDataFrame(
        [(1, "a", 1.0), (1, "b", 1.0), (2, "a", 2.0), (2, "b", 1.0)], "user_id int, item_id string, score double"
    )
    rel = spark.createDataFrame([(1, "b", 1.0), (2, "b", 1.0)], "user_id int, item_id string, relevance double")
    rows = {r.user_id: r.dcg for r in evaluate(recs, rel, k=[2], ties="average").per_user.collect()}
    assert rows[1] == pytest.approx((1.0 + 1 / np.log2(3)) / 2)  # b's gain spread over both tied slots
    assert rows[2] == pytest.approx(1 / np.log2(3))


def test_tie_averaging_counts_repeats_among_the_first_k_only(spark):
    # k = 2 cuts the tie of b and c (0.5): c's two rows are kept past k for the mean gain only.
    recs = spark.createDataFrame(
        [(1, "a", 0.9), (1, "b", 0.5), (1, "c", 0.5), (1, "c", 0.5), (2, "a", 0.1)],
        "user_id int, item_id string, score double",
    )
    rel = spark.createDataFrame([(1, "c", 1.0), (2, "a", 1.0)], "user_id int, item_id string, relevance double")
    counts = "users", "duplicate_recommendations"
    for ties in ("item", "average"):
        result = evaluate(recs, rel, k=[2], ties=ties)
        assert tuple(result.summary.select(*counts).first()) == (2, 0), ties
        sums = result.row_accounting()
        reasons = ("recommendations_beyond_k", "recommendations_used", "recommendations_repeated")
        assert tuple(sums[c] for c in reasons) == (2, 3, 0), ties
    # The tied group b, c, c fills slots 2-4 with its mean gain (0 + 1 + 0) / 3 (the repeat gains nothing); slot 2 is within k.
    dcg = {r.user_id: r.dcg for r in evaluate(recs, rel, k=[2], ties="average").per_user.collect()}
    assert dcg[1] == pytest.approx((0.0 + 1.0 + 0.0) / 3 / np.log2(3))


def test_tie_averaged_gains_are_the_mean_of_each_run_of_equal_keys(spark):
    """The run averages against plain Python, on lists in position order (keys ascending)."""
    rng = np.random.default_rng(11)
    rows = [
        (0, None, None),
        (1, [], []),
        (2, [-0.0, 0.0], [1.0, 0.0]),
        (3, [5.0] * 40, [float(g) for g in range(40)]),
        (4, [1.0, 1.0] + [float(x) for x in range(2, 3000)], [0.5] * 1000 + [1.0] * 2000),
    ]
    for u in range(5, 200):
        n = int(rng.integers(1, 30))
        keys = sorted(float(x) for x in rng.choice([-2.0, -1.0, -0.5, 0.0, 0.25, 3.0], size=n))
        rows.append((u, keys, [float(g) for g in rng.choice([0.0, 1.0, 3.0, 0.1 * u], size=n)]))

    def averaged(keys, gains):
        if keys is None:
            return None
        out, start = [], 0
        for i in range(1, len(keys) + 1):
            if i == len(keys) or keys[i] != keys[start]:
                total = 0.0
                for g in gains[start:i]:
                    total += g
                out += [total / (i - start)] * (i - start)
                start = i
        return out

    schema = "u int, o array<double>, g array<double>"
    got = spark.createDataFrame(rows, schema).selectExpr("u", f"{_scoring.tie_averaged('g', 'o')} AS g")
    expected = spark.createDataFrame([(u, averaged(o, g)) for u, o, g in rows], "u int, g array<double>")
    assert_df_equality(got, expected, ignore_nullable=True)


def test_first_occurrences_flag_each_item_once_in_position_order(spark):
    """first_occurrences / first_occurrence_only against plain Python, incl. a 5,000-long list."""
    from ndcg_spark._spark.sql import first_occurrence_only, first_occurrences, occurrence_order

    rng = np.random.default_rng(5)
    rows = [
        (0, None),
        (1, ["a", "b"]),
        (2, ["a", "a"]),
        (3, ["b", "a", "b", "c", "a", "a"]),
        (4, [f"i{int(x)}" for x in rng.integers(0, 3000, size=5000)]),
    ]
    rows += [(u, [f"i{int(x)}" for x in rng.integers(0, 6, size=int(rng.integers(2, 12)))]) for u in range(5, 80)]

    def firsts(items):
        if items is None:
            return None
        seen, out = set(), []
        for x in items:
            out.append(x not in seen)
            seen.add(x)
        return out

    df = spark.createDataFrame(
        [(u, x, None if x is None else [float(i + 1) for i in range(len(x))]) for u, x in rows],
        "u int, x array<string>, v array<double>",
    )
    got = (
        df.selectExpr("u", "v", f"{occurrence_order('x')} AS p")
        .selectExpr("u", "v", f"{first_occurrences('p')} AS f")
        .selectExpr("u", "f", f"{first_occurrence_only('v', 'f')} AS v")
    )
    expected = spark.createDataFrame(
        [
            (u, firsts(x), None if x is None else [float(i + 1) if f else 0.0 for i, f in enumerate(firsts(x))])
            for u, x in rows
        ],
        "u int, f array<boolean>, v array<double>",
    )
    assert sum(1 for _, x in rows if x and len(set(x)) < len(x)) > 50
    assert_df_equality(got.orderBy("u"), expected.orderBy("u"), ignore_nullable=True)


# ----------------------------------------------------------------------------- ALS output


def test_als_recommend_for_all_users_as_input(spark, data_dir):
    from pyspark.ml.recommendation import ALS

    ratings = spark.read.csv(str(data_dir / "movielens_subset.csv"), header=True, inferSchema=True)
    train, test = ratings.randomSplit([0.8, 0.2], seed=1)
    model = ALS(
        userCol="userId", itemCol="movieId", ratingCol="rating", rank=4, maxIter=3, seed=3, coldStartStrategy="drop"
    ).fit(train)
    als_output = model.recommendForAllUsers(10)  # userId, recommendations: array<struct<movieId, rating>>
    relevance = test.select("userId", "movieId", F.col("rating").alias("relevance"))
    options = dict(k=[5, 10], user_col="userId", item_col="movieId")
    as_array = evaluate(als_output, relevance, recommendations_layout="array", score_col="rating", **options)
    rows = als_output.select("userId", F.inline("recommendations"))
    as_rows = evaluate(rows, relevance, score_col="rating", **options)
    assert_df_equality(as_array.per_user.orderBy("userId", "k"), as_rows.per_user.orderBy("userId", "k"))
    by_order = evaluate(als_output, relevance, recommendations_layout="array", array_ranking="order", **options)
    assert_df_equality(by_order.per_user.orderBy("userId", "k"), as_rows.per_user.orderBy("userId", "k"))
    # The result's options are the ones asked for: the array position is ranked without a rank column.
    asked = EvaluationOptions(recommendations_layout="array", array_ranking="order", **options)
    assert by_order.options == asked and by_order.options.rank_col is None
    summary = as_array.summary.collect()
    assert summary[0].users > 50 and 0.0 <= summary[1].mean_ndcg <= 1.0
