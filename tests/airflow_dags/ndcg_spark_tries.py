"""The DAG tests/test_airflow.py runs under a real Airflow (``airflow dags test``).

Four tasks on the bundled sample: a night whose first try is stopped by its ``execution_timeout``
while it waits before publishing (the job's own fault hook, tests/faults.py) and whose second try
completes; a try stopped from outside while it waits there; a missing input (exit 3) and a
failed gate (exit 4), each with retries.

Paths come from the environment the test sets: NDCG_SPARK_ROOT (the repository) and
NDCG_SPARK_OUT (a folder of the test's own).
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG

from ndcg_spark.airflow import NdcgSparkOperator

ROOT = Path(os.environ["NDCG_SPARK_ROOT"])
OUT = Path(os.environ["NDCG_SPARK_OUT"])
SAMPLE = ["--config", str(ROOT / "conf" / "sample.toml"), "--master", "local[1]"]
#: Long enough for a whole run of the sample on a busy 2-core machine, which try 2 is.
TIMEOUT = timedelta(seconds=300)
#: Try 1 waits before its publish until stopped: a shorter timeout only keeps the test short.
FIRST_TRY = timedelta(seconds=25)


def timeout_of_the_try(context) -> None:
    """``pre_execute``: the first try's timeout is FIRST_TRY, the others' TIMEOUT."""
    context["task"].execution_timeout = FIRST_TRY if context["ti"].try_number == 1 else TIMEOUT


with DAG(
    "ndcg_spark_tries",
    schedule=None,
    start_date=datetime(2026, 11, 1),
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=0)},
):
    NdcgSparkOperator(
        task_id="night",
        # Try 1 stops before its publish until a signal comes; try 2 ("-": no such step) runs through.
        command=[
            sys.executable,
            "-m",
            "tests.faults",
            "{{ 'staged' if ti.try_number == 1 else '-' }}",
            str(OUT / "paused"),
            "--",
        ],
        arguments=[*SAMPLE, "--output", str(OUT / "night"), "--run-date", "{{ ds }}"],
        cwd=str(ROOT),
        execution_timeout=TIMEOUT,
        pre_execute=timeout_of_the_try,
    )
    NdcgSparkOperator(
        task_id="stopped_from_outside",
        # Waits before its publish until the test stops the task from outside (a SIGTERM to the
        # task's process, as Airflow's supervisor sends one): no retry, to read that try alone.
        command=[sys.executable, "-m", "tests.faults", "staged", str(OUT / "stopped_from_outside.paused"), "--"],
        arguments=[*SAMPLE, "--output", str(OUT / "outside"), "--run-date", "{{ ds }}"],
        cwd=str(ROOT),
        retries=0,
    )
    NdcgSparkOperator(
        task_id="missing_input",
        arguments=[*SAMPLE, "--recommendations", str(OUT / "nowhere.csv"), "--output", str(OUT / "missing")],
    )
    NdcgSparkOperator(
        task_id="failed_gate",
        arguments=[*SAMPLE, "--output", str(OUT / "gate"), "--fail-below", "10:0.5"],
    )
