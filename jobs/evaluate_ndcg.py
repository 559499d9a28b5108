"""spark-submit entry point: ``spark-submit jobs/evaluate_ndcg.py --config conf/sample.toml``.

Only wiring: the config, the reading, the metric and the writing live in ``ndcg_spark``.
"""

from ndcg_spark.job import entrypoint

if __name__ == "__main__":
    entrypoint()
