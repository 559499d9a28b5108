"""NdcgEvaluator: the library's figure as a Spark ML Evaluator, in model selection on MovieLens."""

from __future__ import annotations

import pytest
from pyspark.ml import Pipeline
from pyspark.ml.evaluation import RankingEvaluator
from pyspark.ml.feature import SQLTransformer
from pyspark.ml.recommendation import ALS
from pyspark.ml.tuning import CrossValidator, CrossValidatorModel, ParamGridBuilder, TrainValidationSplit
from pyspark.sql import functions as F

from ndcg_spark import evaluate
from ndcg_spark.errors import ConfigError, InputDataError
from ndcg_spark.ml import NdcgEvaluator
from tests.helpers import reference_ndcg

ROWS_SCHEMA = "user int, item int, prediction double, label double"
# Held-out items of three users, as a model's transform gives them.
HELD_OUT = [
    (1, 10, 0.9, 1.0),
    (1, 11, 0.8, 0.0),
    (1, 12, 0.7, 3.0),
    (1, 13, 0.1, 2.0),
    (2, 20, 0.5, 2.0),
    (2, 21, 0.6, 4.0),
    (3, 30, 0.9, 0.0),  # edge: no positive label, IDCG 0
]


def held_out_lists():
    ranked, graded = {}, {}
    for user, item, prediction, label in HELD_OUT:
        ranked.setdefault(user, []).append((prediction, item))
        graded.setdefault(user, {})[item] = label
    return {u: [i for _, i in sorted(pairs, reverse=True)] for u, pairs in ranked.items()}, graded


@pytest.mark.parametrize("k, gain", [(1, "linear"), (3, "exponential")])
def test_rows_form_is_the_mean_of_per_user_ndcg(spark, k, gain):
    frame = spark.createDataFrame(HELD_OUT, ROWS_SCHEMA)
    ranked, graded = held_out_lists()
    expected = [reference_ndcg(ranked[u], graded[u], k, exponential=gain == "exponential") for u in ranked]
    figure = NdcgEvaluator(k=k, gain=gain).evaluate(frame)
    assert figure == pytest.approx(sum(expected) / len(expected), abs=1e-12)
    # Under zeroIdcg = "exclude" user 3 (all labels 0) leaves the mean.
    assert NdcgEvaluator(k=k, gain=gain, zeroIdcg="exclude").evaluate(frame) == pytest.approx(
        sum(expected[:2]) / 2, abs=1e-12
    )


def test_arrays_with_binary_labels_match_spark_ranking_evaluator(spark):
    """RankingEvaluator's own shape (array<double> of items, first is best): the same NDCG@k."""
    frame = spark.createDataFrame(
        [
            (1, [5.0, 3.0, 9.0, 1.0], [3.0, 1.0, 7.0]),
            (2, [2.0, 4.0], [4.0]),
            (3, [8.0, 6.0, 2.0], [6.0, 8.0, 2.0, 11.0, 12.0]),
            (4, [1.0], []),  # edge: nothing relevant, NDCG 0 for both
        ],
        "user int, prediction array<double>, label array<double>",
    )
    for k in (2, 5):
        spark_figure = RankingEvaluator(metricName="ndcgAtK", k=k).evaluate(frame)
        assert NdcgEvaluator(k=k).evaluate(frame) == pytest.approx(spark_figure, abs=1e-12)


def test_recommend_for_all_users_arrays_with_graded_labels_equal_the_rows_form(spark):
    """ALS's recommendForAllUsers structs, joined with labels as a map or as structs."""
    ranked, graded = held_out_lists()
    recs = spark.createDataFrame(
        [(u, [(i, float(len(items) - n)) for n, i in enumerate(items)]) for u, items in ranked.items()],
        "user int, prediction array<struct<item: int, rating: float>>",
    )
    as_map = spark.createDataFrame(
        [(u, {i: r for i, r in m.items()}) for u, m in graded.items()], "user int, label map<int, double>"
    )
    as_structs = spark.createDataFrame(
        [(u, list(m.items())) for u, m in graded.items()], "user int, label array<struct<item: int, label: double>>"
    )
    rows_figure = NdcgEvaluator(k=2).evaluate(spark.createDataFrame(HELD_OUT, ROWS_SCHEMA))
    for labels in (as_map, as_structs):
        assert NdcgEvaluator(k=2).evaluate(recs.join(labels, "user")) == pytest.approx(rows_figure, abs=1e-12)


def test_bad_frames_and_params_are_refused(spark):
    frame = spark.createDataFrame(HELD_OUT, ROWS_SCHEMA)
    with pytest.raises(InputDataError, match="no column 'rating'"):
        NdcgEvaluator(labelCol="rating").evaluate(frame)
    with pytest.raises(ConfigError, match="gain = 'log'"):
        NdcgEvaluator(gain="log").evaluate(frame)
    with pytest.raises(InputDataError, match="no user to score"):
        NdcgEvaluator().evaluate(frame.limit(0))


def test_persistence_round_trip(spark, tmp_path):
    evaluator = NdcgEvaluator(k=5, userCol="u", itemCol="i", labelCol="rating", gain="exponential", zeroIdcg="exclude")
    evaluator.save(str(tmp_path / "evaluator"))
    loaded = NdcgEvaluator.load(str(tmp_path / "evaluator"))
    assert loaded.uid == evaluator.uid
    assert {p.name: v for p, v in loaded.extractParamMap().items()} == {
        p.name: v for p, v in evaluator.extractParamMap().items()
    }
    assert loaded.options() == evaluator.options()


def test_train_validation_split_selects_the_als_rank_with_the_best_ndcg(spark, data_dir):
    """ALS in a Pipeline, tuned on the MovieLens sample: the evaluator's figure for each grid
    point is evaluate's on the same validation frame, and the best of them is selected."""
    ratings = spark.read.csv(
        str(data_dir / "movielens_subset.csv"), header=True, schema="userId int, movieId int, rating double, ts long"
    ).drop("ts")
    als = ALS(
        userCol="userId", itemCol="movieId", ratingCol="rating", coldStartStrategy="drop", maxIter=3, regParam=0.1
    )
    grid = ParamGridBuilder().addGrid(als.rank, [1, 8]).build()
    evaluator = NdcgEvaluator(k=10, userCol="userId", itemCol="movieId", labelCol="rating")
    seed = 11
    tuned = TrainValidationSplit(
        estimator=Pipeline(stages=[als]),
        estimatorParamMaps=grid,
        evaluator=evaluator,
        trainRatio=0.75,
        seed=seed,
        collectSubModels=True,
    ).fit(ratings)
    # TrainValidationSplit's split: rows with rand(seed) >= trainRatio are held out.
    validation = ratings.select("*", F.rand(seed).alias("r")).filter(F.col("r") >= 0.75).drop("r")
    figures = []
    for sub_model in tuned.subModels:
        predictions = sub_model.transform(validation)
        result = evaluate(
            predictions,
            predictions,
            k=[10],
            user_col="userId",
            item_col="movieId",
            score_col="prediction",
            relevance_col="rating",
        )
        figures.append(result.summary.first().mean_ndcg)
        assert evaluator.evaluate(predictions) == figures[-1]
    assert tuned.validationMetrics == pytest.approx(figures, abs=1e-12)
    assert abs(figures[0] - figures[1]) > 1e-4  # the grid's points differ, so the choice means something
    best = max(range(len(grid)), key=lambda j: figures[j])
    assert tuned.bestModel.stages[-1].rank == grid[best][als.rank]


def test_cross_validator_over_a_pipeline_keeps_the_better_ranking(spark, tmp_path):
    """Two 'models' in a Pipeline: one ranks by the label itself (NDCG 1 for every user), one
    by its opposite. CrossValidator with NdcgEvaluator keeps the first; the tuned model, with
    its evaluator, is saved and read back."""
    # Each user whole in one fold (foldCol): a random split of the rows depends on the
    # partitioning, and could leave a user only its grade-0 items in a fold (NDCG 0).
    rows = [(u, i, float((u * 7 + i * 3) % 5), u % 2) for u in range(8) for i in range(6)]
    frame = spark.createDataFrame(rows, "user int, item int, label double, fold int")
    scorer = SQLTransformer()
    grid = [
        {scorer.statement: "SELECT *, -label AS prediction FROM __THIS__"},
        {scorer.statement: "SELECT *, label AS prediction FROM __THIS__"},
    ]
    evaluator = NdcgEvaluator(k=3)
    tuned = CrossValidator(
        estimator=Pipeline(stages=[scorer]), estimatorParamMaps=grid, evaluator=evaluator, numFolds=2, foldCol="fold"
    ).fit(frame)
    assert tuned.avgMetrics[1] == 1.0 and tuned.avgMetrics[0] < 0.9
    assert tuned.bestModel.stages[0].getStatement() == grid[1][scorer.statement]
    tuned.save(str(tmp_path / "tuned"))
    loaded = CrossValidatorModel.load(str(tmp_path / "tuned"))
    assert isinstance(loaded.getEvaluator(), NdcgEvaluator) and loaded.getEvaluator().getK() == 3
    assert loaded.avgMetrics == tuned.avgMetrics
