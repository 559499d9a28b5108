"""Edge policies, each with its default and its counts in the summary (whole frames via chispa)."""

from __future__ import annotations

import math

import pytest
from chispa import assert_approx_df_equality, assert_df_equality
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from ndcg_spark import ConfigError, InputDataError, evaluate
from tests.helpers import PER_USER_SCHEMA

L3 = 1 / math.log2(3)

SUMMARY_SCHEMA = (
    "k int, users long, mean_ndcg double, mean_dcg double, std_ndcg double, ndcg_ci_low double, "
    "ndcg_ci_high double, users_zero_idcg long, "
    "users_without_recommendations long, users_without_relevance long, users_excluded long, "
    "duplicate_recommendations long, duplicate_relevance long"
)


@pytest.fixture(scope="module")
def edge_tables(spark):
    """User 1 normal; 2 only zero relevance; 3 relevance but no recommendations; 4 recommendations only;
    5 a repeated item, 6 a list in score order b, a."""
    recs = spark.createDataFrame(
        [
            (1, "a", 0.9),
            (1, "b", 0.8),
            (1, "c", 0.7),
            (2, "a", 0.5),
            (4, "x", 0.3),
            (5, "a", 0.9),
            (5, "a", 0.8),
            (5, "b", 0.7),
            (6, "a", 0.05),
            (6, "b", 0.1),
        ],
        "user_id int, item_id string, score double",
    )
    rel = spark.createDataFrame(
        [
            (1, "b", 2.0),
            (1, "c", 1.0),
            (1, "z", 0.0),
            (2, "a", 0.0),
            (3, "a", 1.0),
            (5, "a", 1.0),
            (5, "b", 1.0),
            (6, "a", 1.0),
        ],
        "user_id int, item_id string, relevance double",
    )
    return recs, rel


def _expected_per_user(spark, rows):
    return spark.createDataFrame(rows, PER_USER_SCHEMA)


def test_defaults_keep_every_user(spark, edge_tables):
    result = evaluate(*edge_tables, k=[2])
    idcg1 = 2 + 1 * L3
    expected = _expected_per_user(
        spark,
        [
            (1, 2, 2.0, 2 * L3, idcg1, 2 * L3 / idcg1, 2, 2),  # n_recommended counts up to the largest k
            (2, 2, 0.0, 0.0, 0.0, 0.0, 1, 0),
            (3, 2, 0.0, 0.0, 1.0, 0.0, 0, 1),
            (4, 2, 0.0, 0.0, 0.0, 0.0, 1, 0),
            # The repeated "a" at position 2 takes its slot but gains nothing.
            (5, 2, 1.0, 1.0, 1 + L3, 1 / (1 + L3), 2, 2),
            (6, 2, 1.0, L3, 1.0, L3, 2, 1),
        ],
    )
    assert_approx_df_equality(result.per_user.orderBy("user_id"), expected, precision=1e-12, ignore_nullable=True)
    ndcgs = [2 * L3 / idcg1, 0.0, 0.0, 0.0, 1 / (1 + L3), L3]
    mean = sum(ndcgs) / 6
    std = math.sqrt(sum((x - mean) ** 2 for x in ndcgs) / 5)
    mean_dcg = (2 * L3 + 1.0 + L3) / 6
    half = 1.959963984540054 * std / math.sqrt(6)
    expected_summary = spark.createDataFrame(
        [(2, 6, mean, mean_dcg, std, mean - half, mean + half, 2, 1, 1, 0, 1, 0)], SUMMARY_SCHEMA
    )
    assert_approx_df_equality(result.summary, expected_summary, precision=1e-12, ignore_nullable=True)


def test_exclusion_policies_drop_users_but_count_them(spark, edge_tables):
    result = evaluate(*edge_tables, k=[2], zero_idcg="exclude", no_recommendations="exclude")
    assert sorted(r.user_id for r in result.per_user.collect()) == [1, 5, 6]
    row = result.summary.first()
    assert (row.users, row.users_excluded, row.users_zero_idcg, row.users_without_recommendations) == (3, 3, 2, 1)


def test_duplicate_relevance_is_an_error_by_default(spark, edge_tables):
    recs, rel = edge_tables
    duplicated = rel.union(spark.createDataFrame([(1, "b", 3.0)], rel.schema))
    with pytest.raises((PySparkException, Py4JJavaError)) as info:
        evaluate(recs, duplicated, k=[2]).summary.collect()
    assert (
        'relevance key (user_id, item_id) appears more than once (set duplicate_relevance = "max" to keep the largest), e.g. user_id=1'
        in str(info.value)
    )


ACTIONS = ["per_user.count", "per_user.collect", "summary.collect", "row_accounting"]


def _raised(action):
    """What a bad row raises: the library's own action its InputDataError, the caller's Spark's exception."""
    return InputDataError if action == "row_accounting" else (PySparkException, Py4JJavaError)


def _act(result, action):
    if "." not in action:
        return getattr(result, action)()
    frame, method = action.split(".")
    return getattr(getattr(result, frame), method)()


@pytest.mark.parametrize("policy", ["zero_idcg", "no_recommendations"])
@pytest.mark.parametrize("action", ACTIONS)
def test_the_repeat_check_runs_whatever_the_action_reads(spark, edge_tables, action, policy):
    # User 9's only judgements are a repeated 0 and it has no recommendations: excluded by
    # either policy, and a count reads no list at all (with one policy Spark could even drop
    # the relevance side of the join). The check must still run.
    recs, rel = edge_tables
    duplicated = rel.union(spark.createDataFrame([(9, "z", 0.0), (9, "z", 0.0)], rel.schema))
    result = evaluate(recs, duplicated, k=[2], **{policy: "exclude"})
    with pytest.raises(_raised(action)) as info:
        _act(result, action)
    assert (
        'relevance key (user_id, item_id) appears more than once (set duplicate_relevance = "max" to keep the largest), e.g. user_id=9'
        in str(info.value)
    )


@pytest.mark.parametrize("action", ACTIONS)
def test_the_rank_tie_check_runs_whatever_the_action_reads(spark, action):
    # User 1 (the tie) has no judgements: excluded under zero_idcg = "exclude".
    recs = spark.createDataFrame([(1, "a", 1), (1, "b", 1), (2, "a", 1)], "user_id int, item_id string, rnk int")
    rel = spark.createDataFrame([(2, "a", 1.0)], "user_id int, item_id string, relevance double")
    result = evaluate(recs, rel, k=[2], rank_col="rnk", zero_idcg="exclude")
    with pytest.raises(_raised(action)) as info:
        _act(result, action)
    assert "has two items at the same rank for one user, e.g. user_id=1" in str(info.value)


def test_a_repeated_judgement_with_grade_zero_is_an_error_too(spark, edge_tables):
    """A 0 grade gains nothing, but the repeat check reads every judged row."""
    recs, rel = edge_tables
    duplicated = rel.union(spark.createDataFrame([(9, "z", 0.0), (9, "z", 0.0)], rel.schema))
    with pytest.raises((PySparkException, Py4JJavaError)) as info:
        evaluate(recs, duplicated, k=[2]).summary.collect()
    assert (
        'relevance key (user_id, item_id) appears more than once (set duplicate_relevance = "max" to keep the largest), e.g. user_id=9'
        in str(info.value)
    )


def test_duplicate_relevance_max_keeps_largest(spark, edge_tables):
    recs, rel = edge_tables
    duplicated = rel.union(spark.createDataFrame([(1, "b", 3.0), (1, "c", 0.5)], rel.schema))
    result = evaluate(recs, duplicated, k=[2], duplicate_relevance="max")
    row = result.per_user.filter("user_id = 1").first()
    assert row.dcg == pytest.approx(3 * L3, abs=1e-12)
    assert row.idcg == pytest.approx(3 + 1 * L3, abs=1e-12)
    assert result.summary.first().duplicate_relevance == 2


def test_whole_list_cutoff_and_several_k_in_one_result(spark, edge_tables):
    result = evaluate(*edge_tables, k=[1, None, 2])
    ks = [r.k for r in result.summary.collect()]
    assert ks == [1, 2, None]
    user1 = {r.k: r for r in result.per_user.filter("user_id = 1").collect()}
    assert user1[None].dcg == pytest.approx(2 * L3 + 1 / 2, abs=1e-12)
    assert user1[1].dcg == 0.0


def test_cap_ideal_at_list_length(spark, edge_tables):
    capped = evaluate(*edge_tables, k=[3], cap_ideal_at_list_length=True).per_user.filter("user_id = 6").first()
    uncapped = evaluate(*edge_tables, k=[3]).per_user.filter("user_id = 6").first()
    assert capped.idcg == uncapped.idcg == 1.0  # one judged item: the cap changes nothing here
    short = evaluate(*edge_tables, k=[3], cap_ideal_at_list_length=True).per_user.filter("user_id = 5").first()
    assert short.idcg == pytest.approx(1 + L3, abs=1e-12)


def test_explicit_rank_column(spark):
    recs = spark.createDataFrame(
        [(1, "a", 3), (1, "b", 1), (1, "c", 2), (2, "a", 7)], "user_id int, item_id string, rank int"
    )
    rel = spark.createDataFrame([(1, "b", 1.0), (2, "a", 1.0)], "user_id int, item_id string, relevance double")
    got = evaluate(recs, rel, k=[1], rank_col="rank").per_user.orderBy("user_id")
    expected = _expected_per_user(spark, [(1, 1, 1.0, 1.0, 1.0, 1.0, 1, 1), (2, 1, 1.0, 1.0, 1.0, 1.0, 1, 1)])
    assert_df_equality(got, expected, ignore_nullable=True)


def test_custom_column_names_with_dots_spaces_and_backticks(spark):
    recs = spark.createDataFrame([("u", "i", 1.0)], "`user id` string, `a.b` string, `sc``ore` double")
    rel = spark.createDataFrame([("u", "i", 2.0)], "`user id` string, `a.b` string, `rel` double")
    result = evaluate(recs, rel, k=[1], user_col="user id", item_col="a.b", score_col="sc`ore", relevance_col="rel")
    assert result.per_user.columns[0] == "user id"
    assert result.per_user.first().ndcg == 1.0


@pytest.mark.parametrize(
    "options, words",
    [
        ({"k": [0]}, "k must hold positive integers"),
        ({"k": "5,x"}, "k must hold positive integers"),
        ({"gain": "cubic"}, "gain = 'cubic' is not one of linear, exponential"),
        ({"zero_idcg": "drop"}, "zero_idcg = 'drop' is not one of zero, exclude"),
        ({"gian": "linear"}, "unknown option 'gian'; did you mean 'gain'?"),
    ],
)
def test_bad_options_are_config_errors(spark, edge_tables, options, words):
    with pytest.raises(ConfigError, match=None) as info:
        evaluate(*edge_tables, **options)
    assert words in str(info.value)
