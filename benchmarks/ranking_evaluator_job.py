"""The job a competent engineer would write with Spark ML's RankingEvaluator (benchmarks/job.py's P).

Reads both Parquet tables, takes each user's top k by score (item ascending on ties) with a
window, builds the rank-ordered prediction arrays and the arrays of relevant items, joins them
per user, evaluates NDCG@k (binary relevance: grade > 0) and writes the mean as JSON.

    python benchmarks/ranking_evaluator_job.py RECS REL OUT.json [--k 10] [--master local[2]]

``evaluate_and_write(spark, recs, rel, out, k)`` is the job's body, for a session already
running (``benchmarks/fixed.py`` times it warm beside the job's entry point).
"""

import argparse
import json


def evaluate_and_write(spark, recommendations: str, relevance: str, output: str, k: int = 10) -> float:
    """Read both tables, evaluate NDCG@k with RankingEvaluator, write the mean as JSON; the mean."""
    from pyspark.ml.evaluation import RankingEvaluator
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    recs, rel = spark.read.parquet(recommendations), spark.read.parquet(relevance)
    by_score = Window.partitionBy("user_id").orderBy(F.col("score").desc(), F.col("item_id").asc())
    top = recs.withColumn("rn", F.row_number().over(by_score)).filter(F.col("rn") <= k)
    predictions = top.groupBy("user_id").agg(
        F.array_sort(F.collect_list(F.struct("rn", F.col("item_id").cast("double").alias("item")))).alias("ranked")
    )
    labels = (
        rel.filter("relevance > 0")
        .groupBy("user_id")
        .agg(F.collect_list(F.col("item_id").cast("double")).alias("label"))
    )
    data = predictions.select("user_id", F.col("ranked.item").alias("prediction")).join(labels, "user_id")
    ndcg = RankingEvaluator(metricName="ndcgAtK", k=k).evaluate(data)
    with open(output, "w") as out:
        json.dump({"k": k, "mean_ndcg": ndcg}, out)
    return ndcg


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    p = argparse.ArgumentParser()
    p.add_argument("recommendations")
    p.add_argument("relevance")
    p.add_argument("output")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--master", default="local[2]")
    args = p.parse_args()
    spark = SparkSession.builder.master(args.master).appName("ranking-evaluator-job").getOrCreate()
    evaluate_and_write(spark, args.recommendations, args.relevance, args.output, args.k)
    spark.stop()
