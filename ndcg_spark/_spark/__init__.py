"""Spark support: what differs between Spark lines (:mod:`~ndcg_spark._spark.compat`), what a
Spark exception says (:mod:`~ndcg_spark._spark.failures`), Spark SQL text
(:mod:`~ndcg_spark._spark.sql`) and row counts on the evaluation's own pass
(:mod:`~ndcg_spark._spark.counts`)."""
