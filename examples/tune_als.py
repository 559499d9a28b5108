"""Tune ALS for NDCG@10 with CrossValidator and NdcgEvaluator on the bundled MovieLens ratings.

    python examples/tune_als.py [--ratings examples/movielens/ratings.csv] [--sample 0.2]

Each fold's validation ratings are scored by the fitted model; NdcgEvaluator ranks each user's
held-out films by the predicted rating, grades them by the stars given, and returns the mean
NDCG@10 computed by ndcg_spark.evaluate. CrossValidator keeps the grid point with the largest
mean (NDCG is larger-is-better). The last lines show the same figure from evaluate itself, with
its 95% interval, on a held-out test split.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pyspark.ml.recommendation import ALS
from pyspark.ml.tuning import CrossValidator, ParamGridBuilder
from pyspark.sql import SparkSession

from ndcg_spark import evaluate
from ndcg_spark.ml import NdcgEvaluator

HERE = Path(__file__).parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ratings", default=str(HERE / "movielens" / "ratings.csv"))
    parser.add_argument("--sample", type=float, default=0.2, help="Share of the ratings to use (1.0 for all).")
    args = parser.parse_args()

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tune-als")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    ratings = spark.read.csv(args.ratings, header=True, schema="userId int, movieId int, rating double, ts long")
    ratings = ratings.drop("ts").sample(fraction=args.sample, seed=1) if args.sample < 1 else ratings.drop("ts")
    train, test = ratings.randomSplit([0.8, 0.2], seed=2)

    # "drop": a film or user unseen in training has a NaN prediction, which the evaluation refuses.
    als = ALS(userCol="userId", itemCol="movieId", ratingCol="rating", coldStartStrategy="drop", maxIter=5, seed=3)
    grid = ParamGridBuilder().addGrid(als.rank, [4, 12]).addGrid(als.regParam, [0.05, 0.3]).build()
    evaluator = NdcgEvaluator(k=10, userCol="userId", itemCol="movieId", labelCol="rating", gain="exponential")
    tuner = CrossValidator(estimator=als, estimatorParamMaps=grid, evaluator=evaluator, numFolds=2, seed=4)
    model = tuner.fit(train)

    for params, metric in zip(grid, model.avgMetrics):
        print(f"rank={params[als.rank]:>2}  regParam={params[als.regParam]:.2f}  mean NDCG@10 = {metric:.4f}")
    chosen = grid[max(range(len(grid)), key=lambda i: model.avgMetrics[i])]
    print(
        f"chosen: rank={chosen[als.rank]} regParam={chosen[als.regParam]:.2f} (bestModel.rank = {model.bestModel.rank})"
    )

    predictions = model.bestModel.transform(test)
    print(f"test NDCG@10 (NdcgEvaluator) = {evaluator.evaluate(predictions):.4f}")
    result = evaluate(
        predictions,
        predictions,
        evaluator.options(),  # the evaluator's Params as EvaluationOptions: the same figure
    )
    result.summary.select("k", "users", "mean_ndcg", "ndcg_ci_low", "ndcg_ci_high").show()
    spark.stop()


if __name__ == "__main__":
    main()
