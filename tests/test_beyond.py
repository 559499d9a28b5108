"""Beyond accuracy by hand: one tiny catalog, each metric's values worked out from its definition
(docs/conventions.md, Beyond accuracy), then the switches, the bad inputs and the bound on histories.

The case (k = 2 and the whole list):

* interactions (10 rows): user 1 {a, b}; user 2 {a, c}; user 3 {a, a, d}; user 6 {b, c, z}.
  Popularity (rows): a 4, b 2, c 2, d 1, z 1; e is cold. Users per item: a 3, b 2, c 2, d 1, z 1;
  4 users. The head (0.2 of 10 rows = 2): a alone (4 >= 2).
* lists: user 1 [c, d, e]; user 2 [a]; user 4 [b, c] (tied scores: item ascending).
* relevance: user 1 c = 2; user 2 a = 1; user 5 a = 1 (no list).
* items a-e, categories c1 c1 c2 c2 c3, features [1,0] [0,1] [1,1] [1,0] [0,0]; z is unknown to it.
* baseline: user 1 [d, x]; user 4 [c]; none for user 2.

Co-occurrence cosines (|U_i ∩ U_j| / sqrt(|U_i| |U_j|)): b·c = 1/2, a·b = a·c = 1/sqrt(6),
a·d = 1/sqrt(3), c·d = c·e = d·e = 0.
"""

from __future__ import annotations

import math
import re

import pytest
from chispa import assert_approx_df_equality

from ndcg_spark import ConfigError, EvaluationOptions, evaluate
from ndcg_spark._beyond import similarity
from ndcg_spark.errors import InputDataError, RowCheckFailed, as_error

L = math.log2
S6, S2 = math.sqrt(6), math.sqrt(2)
PER_USER = (
    "novelty",
    "surprisal",
    "unseen_share",
    "popularity",
    "long_tail_share",
    "diversity",
    "category_diversity",
    "serendipity",
    "unexpectedness",
)


@pytest.fixture(scope="module")
def tables(spark):
    inter = [(1, "a"), (1, "b"), (2, "a"), (2, "c"), (3, "a"), (3, "a"), (3, "d"), (6, "b"), (6, "c"), (6, "z")]
    items = [
        ("a", "c1", [1.0, 0.0]),
        ("b", "c1", [0.0, 1.0]),
        ("c", "c2", [1.0, 1.0]),
        ("d", "c2", [1.0, 0.0]),
        ("e", "c3", [0.0, 0.0]),
    ]
    return {
        "recs": spark.createDataFrame(
            [(1, "c", 0.9), (1, "d", 0.8), (1, "e", 0.7), (2, "a", 0.9), (4, "c", 0.5), (4, "b", 0.5)],
            "user_id int, item_id string, score double",
        ),
        "rel": spark.createDataFrame(
            [(1, "c", 2.0), (2, "a", 1.0), (5, "a", 1.0)], "user_id int, item_id string, relevance double"
        ),
        "interactions": spark.createDataFrame(inter, "user_id int, item_id string"),
        "items": spark.createDataFrame(items, "item_id string, category string, features array<double>"),
        "baseline": spark.createDataFrame(
            [(1, "d", 1.0), (1, "x", 0.5), (4, "c", 1.0)], "user_id int, item_id string, score double"
        ),
    }


def run(tables, **options):
    return evaluate(
        tables["recs"],
        tables["rel"],
        k=[2, None],
        interactions=tables["interactions"],
        items=tables["items"],
        baseline_recommendations=tables["baseline"],
        item_category_col="category",
        item_features_col="features",
        **options,
    )


def expect(spark, rows, names):
    schema = ", ".join(["user_id int", "k int", *[f"{n} double" for n in names]])
    return spark.createDataFrame(rows, schema)


def got(result, names):
    return result.per_user.select("user_id", "k", *names).orderBy("user_id", "k")


# ----------------------------------------------------------------------------- each metric by hand


def test_every_metric_per_user_and_k_by_hand(spark, tables):
    """Each row is the definition applied to the case (the module's docstring): user 5 has no list,
    so nulls; user 2's one-item list has no diversity; user 4 has no history, so no serendipity,
    and its items are all unseen."""
    result = run(tables, beyond_accuracy=True)
    assert result.beyond == (*PER_USER, "catalog_coverage", "distributional_coverage", "gini_index")
    ser_c = (1 - (1 / S6 + 0.5) / 2) * 2.0  # c against user 1's {a, b}, relevance 2
    ser_a = (1 - (1 + 1 / S6) / 2) * 1.0  # a against user 2's {a, c}: a is its own cosine 1
    rows = [
        # novelty, surprisal, unseen, popularity, long tail, diversity, categories, serendipity, unexpectedness
        (1, 2, (L(5) + L(10)) / 2, (0.5 + 1) / 2, 1.0, (2 + 1) / 2, 1.0, 1.0, 1 / 2, ser_c / 2, 1 - 1 / 2),
        (1, None, (L(5) + 2 * L(10)) / 3, (0.5 + 1 + 1) / 3, 1.0, 3 / 3, 1.0, 1.0, 2 / 3, ser_c / 3, 1 - 1 / 3),
        (2, 2, L(2.5), L(4 / 3) / 2, 0.0, 4.0, 0.0, None, 1.0, ser_a, 1.0),
        (2, None, L(2.5), L(4 / 3) / 2, 0.0, 4.0, 0.0, None, 1.0, ser_a, 1.0),
        (4, 2, L(5), 0.5, 1.0, 2.0, 1.0, 1 - 0.5, 1.0, None, 1 - 1 / 2),
        (4, None, L(5), 0.5, 1.0, 2.0, 1.0, 1 - 0.5, 1.0, None, 1 - 1 / 2),
        (5, 2, *[None] * 9),
        (5, None, *[None] * 9),
    ]
    expected = expect(spark, rows, PER_USER).orderBy("user_id", "k")
    assert_approx_df_equality(got(result, PER_USER), expected, precision=1e-12, ignore_nullable=True)


@pytest.mark.parametrize("paired", [0, 2])
def test_cooccurrence_counted_through_the_items_users_gives_the_same_cosines(spark, tables, monkeypatch, paired):
    """Histories longer than PAIRED_HISTORY are counted through their items' users, not paired
    within themselves: at 2 only user 6's {b, c, z} (the one user holding b and c together: b·c =
    1/2), at 0 every history. Diversity and serendipity are the hand values either way."""
    monkeypatch.setattr(similarity, "PAIRED_HISTORY", paired)
    result = run(tables, beyond_accuracy=["diversity", "serendipity"], similarity="cooccurrence")
    ser_c = (1 - (1 / S6 + 0.5) / 2) * 2.0
    ser_a = (1 - (1 + 1 / S6) / 2) * 1.0
    rows = [
        (1, 2, 1.0, ser_c / 2),
        (1, None, 1.0, ser_c / 3),
        (2, 2, None, ser_a),
        (2, None, None, ser_a),
        (4, 2, 1 - 0.5, None),
        (4, None, 1 - 0.5, None),
        (5, 2, None, None),
        (5, None, None, None),
    ]
    expected = expect(spark, rows, ["diversity", "serendipity"]).orderBy("user_id", "k")
    assert_approx_df_equality(
        got(result, ["diversity", "serendipity"]), expected, precision=1e-12, ignore_nullable=True
    )


def test_the_item_statistics_read_the_interactions_once_each(tables):
    """Popularity and its users come from one aggregate of the interactions per item (the head's
    threshold from those rows' distinct popularity values: a second reading of the same aggregate,
    whose shuffle Spark reuses), and novelty's and surprisal's totals from one more: the per-user
    rows' optimized plan reads the interactions three times, where crossJoins of aggregates, each
    re-reading them, read them seven times."""
    result = run(tables, beyond_accuracy=["novelty", "surprisal", "popularity", "long_tail_share"])
    if not hasattr(result.per_user, "_jdf"):
        pytest.skip("the optimized plan is read from the JVM (not over Spark Connect)")
    plan = result.per_user._jdf.queryExecution().optimizedPlan().toString()
    # The interactions are the one input of two columns, user and item.
    assert len(re.findall(r"LogicalRDD \[user_id#\d+, item_id#\d+\]", plan)) == 3, plan


def test_global_figures_by_hand(spark, tables):
    """At k = 2 the lists show a 1, b 1, c 2, d 1 (5 slots) of the 5-item catalog; the whole lists
    a, b, d, e 1 and c 2 (6 slots). Gini over the catalog sorted ascending (e's 0 first at k = 2):
    (1/4) * Σ (2j - 6) p_j."""
    result = run(tables, beyond_accuracy=["catalog_coverage", "distributional_coverage", "gini_index", "novelty"])
    entropy_2 = -(3 * 0.2 * L(0.2) + 0.4 * L(0.4))
    entropy_all = -(4 * (1 / 6) * L(1 / 6) + (2 / 6) * L(2 / 6))
    gini_2 = ((-4) * 0 + (-2) * 0.2 + 0 * 0.2 + 2 * 0.2 + 4 * 0.4) / 4
    gini_all = ((-4 - 2 + 0 + 2) * (1 / 6) + 4 * (2 / 6)) / 4
    names = ["catalog_coverage", "distributional_coverage", "gini_index", "mean_novelty"]
    novelty_2 = ((L(5) + L(10)) / 2 + L(2.5) + L(5)) / 3
    novelty_all = ((L(5) + 2 * L(10)) / 3 + L(2.5) + L(5)) / 3
    expected = spark.createDataFrame(
        [(2, 4 / 5, entropy_2, gini_2, novelty_2), (None, 5 / 5, entropy_all, gini_all, novelty_all)],
        "k int, catalog_coverage double, distributional_coverage double, gini_index double, mean_novelty double",
    )
    assert_approx_df_equality(result.summary.select("k", *names), expected, precision=1e-12, ignore_nullable=True)
    # users counts NDCG's users, as before; the interval of a beyond-accuracy mean is the normal one.
    row = result.summary.first()
    assert row.users == 4 and row.novelty_ci_low < row.mean_novelty < row.novelty_ci_high
    # The lists the metrics read are NDCG's own: every input row counted once.
    assert result.input_rows() == {"recommendations": 6, "relevance": 3, "interactions": 10, "items": 5}
    # z, an interaction's item, is not in the items table: counted, not dropped in silence.
    assert result.unknown_items() == {"interactions_unknown_items": 1, "recommended_unknown_items": 0}


@pytest.mark.parametrize(
    ("similarity", "diversity", "serendipity"),
    [
        # features: c·d = 1/sqrt(2), b·c = 1/sqrt(2), c·a = c·b = 1/sqrt(2), a·a = 1; e's zero
        # vector is similar to nothing.
        (
            "features",
            [1 - 1 / S2, 1 - (1 / S2) / 3, None, None, 1 - 1 / S2, 1 - 1 / S2],
            [(1 - 1 / S2) * 2 / 2, (1 - 1 / S2) * 2 / 3, 1 - (1 + 1 / S2) / 2, 1 - (1 + 1 / S2) / 2, None, None],
        ),
        # category: c and d share c2; c against user 1's c1, c1; a against user 2's c1, c2.
        ("category", [0.0, 1 - 1 / 3, None, None, 1.0, 1.0], [2 / 2, 2 / 3, 0.5, 0.5, None, None]),
    ],
)
def test_diversity_and_serendipity_per_similarity(spark, tables, similarity, diversity, serendipity):
    result = run(tables, beyond_accuracy=["diversity", "serendipity"], similarity=similarity)
    keys = [(1, 2), (1, None), (2, 2), (2, None), (4, 2), (4, None)]
    rows = [(u, k, d, s) for (u, k), d, s in zip(keys, diversity, serendipity)]
    rows += [(5, 2, None, None), (5, None, None, None)]
    expected = expect(spark, rows, ["diversity", "serendipity"]).orderBy("user_id", "k")
    assert_approx_df_equality(
        got(result, ["diversity", "serendipity"]), expected, precision=1e-12, ignore_nullable=True
    )


# ----------------------------------------------------------------------------- each peer's switches


def test_recommenders_switches_cold_items_and_weighting(spark, tables):
    """Recommenders: a cold item adds 0 to novelty (e, user 1) and mean_novelty is per
    recommendation; coverage is every recommended item over the interactions' 5 items (e too).
    Its evaluator refuses a list repeating the history: the preset drops user 2's a (seen), which
    leaves user 2 no list; kept here (seen_items = "keep") to pin the other switches."""
    dropped = run(tables, convention="recommenders", beyond_accuracy=["novelty"])
    assert {r.user_id for r in dropped.per_user.collect() if r.novelty is not None} == {1, 4}
    result = run(tables, convention="recommenders", seen_items="keep", beyond_accuracy=["novelty", "catalog_coverage"])
    novelty_all = (L(5) + L(10) + 0.0) / 3
    assert got(result, ["novelty"]).filter("user_id = 1 AND k IS NULL").first().novelty == pytest.approx(novelty_all)
    row = next(r for r in result.summary.collect() if r.k is None)
    every = L(5) + L(10) + 0.0 + L(2.5) + L(10 / 2) + L(5)  # c d e | a | b c
    assert row.mean_novelty == pytest.approx(every / 6, abs=1e-12)
    assert row.novelty_ci_low is None
    assert row.catalog_coverage == pytest.approx(5 / 5)  # a b c d e over a b c d z


def test_replay_switches_divide_by_k_and_score_users_without_a_list(spark, tables):
    """RePlay: Surprisal, Unexpectedness and CategoricalDiversity divide by k (user 2's one item
    at k = 2), Novelty scores a training user without a list 1.0 (user 3: interactions only) and
    a user without interactions not at all (user 4), Unexpectedness is 0.0 without a baseline."""
    names = ["surprisal", "unseen_share", "unexpectedness", "category_diversity"]
    result = run(tables, convention="replay", beyond_accuracy=names)
    values = {(r.user_id, r.k): tuple(r[n] for n in names) for r in got(result, names).collect()}
    assert values[(2, 2)] == pytest.approx((L(4 / 3) / 2 / 2, 0.0, 0.0, 1 / 2))
    assert values[(3, 2)] == (None, 1.0, None, None) and values[(6, None)] == (None, 1.0, None, None)
    assert values[(4, 2)][1] is None and values[(5, 2)] == (None, None, None, None)
    # Users with interactions only are no NDCG user: excluded, counted as such.
    assert result.summary.first().users == 3


def test_replay_preset_breaks_ties_by_item_descending(spark, tables):
    """User 4's tied b and c: c first under RePlay's order, b first by default."""
    opts = EvaluationOptions(convention="replay")
    assert opts.tie_break == "item_descending"
    assert EvaluationOptions(convention="recommenders").tie_break == "item_ascending"
    rel = spark.createDataFrame([(4, "b", 1.0)], "user_id int, item_id string, relevance double")
    ndcg = {}
    for convention in ("replay", "recommenders"):
        result = evaluate(tables["recs"].filter("user_id = 4"), rel, k=1, convention=convention)
        ndcg[convention] = result.per_user.first().ndcg
    assert ndcg == {"replay": 0.0, "recommenders": 1.0}


# ----------------------------------------------------------------------------- bad input


def test_a_metric_without_its_input_is_one_line_naming_the_input(spark, tables):
    with pytest.raises(ConfigError, match=r"^novelty needs the interactions table$"):
        evaluate(tables["recs"], tables["rel"], beyond_accuracy=["novelty"])
    with pytest.raises(ConfigError, match=r"^category_diversity needs an items table with item_category_col set$"):
        evaluate(tables["recs"], tables["rel"], items=tables["items"], beyond_accuracy=["category_diversity"])
    with pytest.raises(ConfigError, match=r"unknown beyond-accuracy metric 'novely'; did you mean 'novelty'\?"):
        EvaluationOptions(beyond_accuracy=["novely"])
    with pytest.raises(ConfigError, match="head_share must be above 0 and at most 1"):
        EvaluationOptions(head_share=0)
    # true asks for what the inputs allow: without any, the global figures only.
    result = evaluate(tables["recs"], tables["rel"], beyond_accuracy=True)
    assert result.beyond == ("catalog_coverage", "distributional_coverage", "gini_index")


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [("a", [1.0, 0.0]), ("b", [1.0])],
            "items column 'features' has 1 values where the longest has 2, e.g. item_id=b",
        ),
        ([("a", [1.0, None]), ("b", [1.0, 1.0])], "items column 'features' holds a null or NaN, e.g. item_id=a"),
        ([("a", None), ("b", [1.0, 1.0])], "items column 'features' is null, e.g. item_id=a"),
        ([("a", [1.0, 0.0]), ("a", [1.0, 1.0])], "items table lists an item more than once, e.g. item_id=a"),
    ],
    ids=["length", "null-element", "null", "repeated"],
)
def test_a_bad_items_row_stops_the_run_naming_the_item(spark, tables, rows, message):
    items = spark.createDataFrame(rows, "item_id string, features array<double>")
    result = evaluate(
        tables["recs"],
        tables["rel"],
        items=items,
        item_features_col="features",
        beyond_accuracy=True,
        similarity="features",
    )
    with pytest.raises(Exception) as info:
        result.per_user.collect()
    error = as_error(info.value)
    assert isinstance(error, RowCheckFailed) and str(error) == f"invalid input: {message}"


def test_a_history_past_max_history_stops_the_run_naming_the_user(spark, tables):
    """Serendipity pairs each history with the user's relevant recommended items: user 6's 3
    distinct items pass 2. Diversity alone reads no history: no bound."""
    assert run(tables, beyond_accuracy=["diversity"], max_history=2).per_user.count() > 0
    result = run(tables, beyond_accuracy=["serendipity"], max_history=2)
    with pytest.raises(Exception) as info:
        result.per_user.collect()
    assert str(as_error(info.value)).startswith(
        "invalid input: interactions: user_id=6 has 3 distinct items, more than max_history = 2"
    )


def test_segments_of_the_recommendations_are_separate_runs(spark, tables):
    """Model m2 holds user 1's list alone: its figures are those of a run of that list alone."""
    recs = (
        tables["recs"]
        .selectExpr("'m1' AS model", "*")
        .unionByName(tables["recs"].filter("user_id = 1").selectExpr("'m2' AS model", "*"))
    )
    names = ["novelty", "catalog_coverage"]
    both = evaluate(
        recs, tables["rel"], k=[2], group_by=["model"], interactions=tables["interactions"], beyond_accuracy=names
    )
    alone = evaluate(
        tables["recs"].filter("user_id = 1"),
        tables["rel"],
        k=[2],
        interactions=tables["interactions"],
        beyond_accuracy=names,
    )
    m2 = both.summary.filter("model = 'm2'").select("k", "mean_novelty", "catalog_coverage")
    assert_approx_df_equality(m2, alone.summary.select("k", "mean_novelty", "catalog_coverage"), precision=1e-12)
    # The catalog without an items table: the interactions' items and the lists' within k (a-d, z).
    assert both.summary.filter("model = 'm1'").first().catalog_coverage == pytest.approx(4 / 5)


def test_compare_pairs_each_per_user_metric_where_both_sides_have_it(spark):
    """compare pairs novelty user by user as NDCG: interactions a a a b (a: -log2(3/4) bits, b and
    the cold c: 2 bits). Baseline lists 1 [a, b], 2 [c]; candidate 1 [b, c], 2 [a]; user 3 has
    relevance only (no list on either side: no novelty to pair, an NDCG pair the default policy
    keeps at 0 - 0). The summary's novelty figures are over users 1 and 2; report() adds the paired
    t interval (t quantile of 1 degree of freedom); compare_models' pair gives the same."""
    from ndcg_spark import compare, compare_models
    from ndcg_spark._comparison.statistics import student_t_quantile

    schema = "user_id int, item_id string, score double"
    base = spark.createDataFrame([(1, "a", 2.0), (1, "b", 1.0), (2, "c", 1.0)], schema)
    cand = spark.createDataFrame([(1, "b", 2.0), (1, "c", 1.0), (2, "a", 1.0)], schema)
    rel = spark.createDataFrame(
        [(1, "a", 1.0), (2, "c", 1.0), (3, "a", 1.0)], "user_id int, item_id string, relevance double"
    )
    inter = spark.createDataFrame([(1, "a"), (2, "a"), (3, "a"), (3, "b")], "user_id int, item_id string")
    a = -L(3 / 4)
    before, after = {1: (a + 2) / 2, 2: 2.0}, {1: 2.0, 2: a}
    result = compare(base, cand, rel, k=[2], beyond_accuracy=["novelty"], interactions=inter)
    assert result.beyond == ("novelty",)
    # NDCG: each baseline list finds its relevant item first (1.0), each candidate's misses it (0.0).
    expected = spark.createDataFrame(
        [
            (1, 2, 1.0, 0.0, -1.0, before[1], after[1], after[1] - before[1]),
            (2, 2, 1.0, 0.0, -1.0, before[2], after[2], after[2] - before[2]),
            (3, 2, 0.0, 0.0, 0.0, None, None, None),
        ],
        "user_id int, k int, ndcg_baseline double, ndcg_candidate double, difference double, "
        "novelty_baseline double, novelty_candidate double, novelty_difference double",
    )
    assert_approx_df_equality(result.per_user.orderBy("user_id"), expected, 1e-12, ignore_nullable=True)
    d = [after[u] - before[u] for u in (1, 2)]
    mean = sum(d) / 2
    std = math.sqrt(sum((x - mean) ** 2 for x in d))  # n - 1 = 1
    half = student_t_quantile(0.975, 1) * std / S2
    row = result.report()[0]
    figures = {c: row[c] for c in row if "novelty" in c}
    assert figures == pytest.approx(
        {
            "novelty_pairs": 2,
            "mean_novelty_baseline": (before[1] + before[2]) / 2,
            "mean_novelty_candidate": (after[1] + after[2]) / 2,
            "mean_novelty_difference": mean,
            "std_novelty_difference": std,
            "novelty_difference_ci_low": mean - half,
            "novelty_difference_ci_high": mean + half,
            "novelty_p_value": row["novelty_p_value"],
        },
        abs=1e-12,
    )
    assert 0.0 < row["novelty_p_value"] < 1.0 and row["pairs"] == 3
    models = compare_models({"base": base, "cand": cand}, rel, k=[2], beyond_accuracy=["novelty"], interactions=inter)
    pair = models.report()[0]
    assert {c: pair[c] for c in figures} == pytest.approx(figures, abs=1e-12)


def test_the_exposure_curve_ranks_the_catalog_by_popularity_and_shares_the_slots(spark, tables):
    """The report's curve at the largest k (the whole lists: a, b, d, e 1 slot, c 2; 6 in all),
    over the items table's catalog a-e ranked by interaction rows a 4, b 2, c 2 (tied with b:
    item ascending), d 1, e 0 (cold; z, unknown to the catalog, is not ranked): 5 items, so one
    per bin, each bin numbered out of 100. Without interactions there is no curve."""
    curve = run(tables, beyond_accuracy=["catalog_coverage"]).exposure_curve()
    expected = spark.createDataFrame(
        [
            (0, 1, 1, 1, 1 / 6, 4 / 9),
            (20, 2, 2, 1, 1 / 6, 2 / 9),
            (40, 3, 3, 1, 2 / 6, 2 / 9),
            (60, 4, 4, 1, 1 / 6, 1 / 9),
            (80, 5, 5, 1, 1 / 6, 0.0),
        ],
        "bin int, first_rank int, last_rank int, items long, exposure_share double, interaction_share double",
    )
    assert_approx_df_equality(curve, expected, precision=1e-12, ignore_nullable=True)
    alone = evaluate(tables["recs"], tables["rel"], k=[2], items=tables["items"], beyond_accuracy=["catalog_coverage"])
    assert alone.exposure_curve() is None


def test_integer_items_of_a_wider_type_are_compared_in_it_never_wrapped(spark):
    """int lists against bigint interactions and baseline: 2**32 + 1 wraps onto item 1 as an int
    and 2**32 + 2 onto item 2, so both must be compared as bigint. User 1's list [1, 2] holds
    items seen once each (popularity 1, not 4 with item 1 counting the wrapped rows) and shares
    nothing with its baseline (unexpectedness 1, not 1/2)."""
    recs = spark.createDataFrame([(1, 1, 0.9), (1, 2, 0.8)], "user_id int, item_id int, score double")
    rel = spark.createDataFrame([(1, 1, 1.0)], "user_id int, item_id int, relevance double")
    wide = 2**32
    inter = [(1, 1), (2, 2), (3, wide + 1), (4, wide + 1), (5, wide + 1)]
    result = evaluate(
        recs,
        rel,
        k=[None],
        interactions=spark.createDataFrame(inter, "user_id int, item_id bigint"),
        baseline_recommendations=spark.createDataFrame(
            [(1, wide + 2, 1.0)], "user_id int, item_id bigint, score double"
        ),
        beyond_accuracy=["popularity", "unexpectedness"],
    )
    expected = spark.createDataFrame(
        [(1, None, 1.0, 1.0)], "user_id int, k int, popularity double, unexpectedness double"
    )
    assert_approx_df_equality(
        got(result, ["popularity", "unexpectedness"]), expected, precision=1e-12, ignore_nullable=True
    )


def test_a_beyond_table_whose_items_are_another_kind_is_refused_naming_it(spark, tables):
    items = spark.createDataFrame([(1, "c1")], "item_id int, category string")
    with pytest.raises(
        InputDataError, match="item column 'item_id' is int in the items table but string in the recommendations"
    ):
        evaluate(tables["recs"], tables["rel"], k=[2], items=items, item_category_col="category",
                 beyond_accuracy=["category_diversity"])  # fmt: skip


def test_each_table_names_its_own_user_and_item_columns(spark, tables):
    """Every table from another system under its own column names, mapped by its keywords: the
    per-user rows equal the run under the contract's names, segments from the user attributes
    included. A column a keyword names that its table lacks stops the run in one line."""
    attributes = spark.createDataFrame([(1, "x"), (2, "y"), (4, "x")], "user_id int, country string")
    expected = run(tables, beyond_accuracy=True, group_by=["country"], user_attributes=attributes).per_user
    own = evaluate(
        tables["recs"],
        tables["rel"],
        k=[2, None],
        interactions=tables["interactions"].toDF("userId", "movieId"),
        items=tables["items"].toDF("movieId", "category", "features"),
        baseline_recommendations=tables["baseline"].toDF("uid", "mid", "score"),
        user_attributes=attributes.toDF("uid", "country"),
        item_category_col="category",
        item_features_col="features",
        beyond_accuracy=True,
        group_by=["country"],
        interactions_user_col="userId",
        interactions_item_col="movieId",
        items_item_col="movieId",
        baseline_user_col="uid",
        baseline_item_col="mid",
        user_attributes_user_col="uid",
    ).per_user
    assert_approx_df_equality(own, expected, 1e-12, ignore_row_order=True, ignore_nullable=True)
    with pytest.raises(InputDataError) as info:
        run(tables, beyond_accuracy=["novelty"], interactions_item_col="movieId")
    assert str(info.value) == (
        "interactions table has no column 'movieId', which interactions_item_col names (it has: user_id, item_id)"
    )
