"""Rebuild the bundled sample from ratings.csv: a time split, ALS, top-20 recommendations.

    python examples/movielens/make_sample.py

Writes recommendations.csv (user_id, item_id, score), relevance.csv (user_id, item_id,
relevance = star rating) and interactions.csv (the training ratings, as ratings.csv holds them:
userId, movieId, rating, timestamp) next to this file. Each user's last 20% of ratings by time are the
ground truth; ALS (fixed seed, one partition so the result does not depend on the machine)
learns from the rest. The outputs are committed; this script documents how they were made.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.ml.recommendation import ALS
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

HERE = Path(__file__).parent


def split(ratings):
    by_time = Window.partitionBy("userId").orderBy("timestamp", "movieId")
    share = Window.partitionBy("userId")
    ranked = ratings.withColumn("i", F.row_number().over(by_time)).withColumn("n", F.count("*").over(share))
    test = ranked.filter(F.col("i") > F.floor(F.col("n") * 0.8))
    train = ranked.filter(F.col("i") <= F.floor(F.col("n") * 0.8))
    return train.drop("i", "n"), test.drop("i", "n")


def main() -> None:
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    ratings = spark.read.csv(str(HERE / "ratings.csv"), header=True, inferSchema=True).coalesce(1)
    train, test = split(ratings)
    als = ALS(
        userCol="userId",
        itemCol="movieId",
        ratingCol="rating",
        rank=16,
        maxIter=10,
        regParam=0.1,
        seed=42,
        coldStartStrategy="drop",
        numUserBlocks=1,
        numItemBlocks=1,
    )
    model = als.fit(train)
    recs = (
        model.recommendForAllUsers(20)
        .select(F.col("userId").alias("user_id"), F.inline("recommendations"))
        .select("user_id", F.col("movieId").alias("item_id"), F.round("rating", 6).alias("score"))
    )
    relevance = test.select(
        F.col("userId").alias("user_id"), F.col("movieId").alias("item_id"), F.col("rating").alias("relevance")
    )
    for name, df in (("recommendations", recs), ("relevance", relevance), ("interactions", train)):
        rows = df.orderBy(*df.columns[:2]).toPandas()
        rows.to_csv(HERE / f"{name}.csv", index=False)
    spark.stop()


if __name__ == "__main__":
    main()
