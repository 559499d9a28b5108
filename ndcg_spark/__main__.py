from ndcg_spark.job import entrypoint

entrypoint()
