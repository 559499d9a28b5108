"""A nightly NDCG evaluation under Apache Airflow 3 (``pip install 'ndcg-spark[airflow]'``).

Each night evaluates that night's recommendations into its dated partition (``--run-date {{ ds }}``)
with the gates of the config, then reports the mean NDCG@10 from the finished record in XCom.

* A failed gate (exit 4), invalid input (3) or a bad config (2) fails the task at once: a retry
  would give the same answer.
* Anything else (a lost executor, a full disk, a stop by the timeout, a live run holding the
  date) is retried: a re-run of the date replaces exactly its own result and takes over a dead
  run's lock.

Copy it into your DAGs folder and point CONFIG at your config (here: the bundled sample).
On a cluster, give the operator ``command=["spark-submit", "--master", "yarn",
"jobs/evaluate_ndcg.py"]`` (the job's flags stay in ``arguments``).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, task

from ndcg_spark.airflow import NdcgSparkOperator

CONFIG = os.environ.get("NDCG_SPARK_CONFIG", str(Path(__file__).resolve().parents[2] / "conf" / "sample.toml"))

with DAG(
    "ndcg_nightly",
    schedule="@daily",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=5)},
    tags=["ndcg-spark"],
) as dag:
    evaluate = NdcgSparkOperator(
        task_id="evaluate",
        arguments=["--config", CONFIG, "--run-date", "{{ ds }}"],
        # A stop by the timeout sends SIGTERM to the job, which ends cleanly; the retry runs the night again.
        execution_timeout=timedelta(hours=2),
    )

    @task
    def report(record: dict) -> float:
        """The finished record: mean NDCG per k ("all" for the whole list), users, gates, output."""
        ndcg = record["mean_ndcg"]["10"]
        print(f"{record['output']} {record['partition']}: mean NDCG@10 {ndcg:.6f} over {record['users']} users")
        return ndcg

    report(evaluate.output)
