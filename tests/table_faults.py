"""The job on a Hive metastore (embedded Derby) in a process of its own, to be killed at a named step.

    python -m tests.table_faults SEEN_JSON STEP PAUSE_FILE [--first] -- JOB_ARGS...

starts the Hive-enabled session the job's ``--conf`` flags describe, writes what a reader of the
table family ``--output-table`` sees to ``SEEN_JSON`` (:func:`seen`), then runs the job (once
without a pause first, with ``--first``), paused at ``STEP`` (``-``: not paused) as
:mod:`tests.faults` pauses it, writing what a reader sees there (nothing is written between the
pause and a kill), and what a reader sees once the job has ended.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence

from ndcg_spark.job import run
from ndcg_spark.job.outputs import contract
from tests.faults import pausing_at


def shown(spark, view: str) -> bool:
    """Whether a reader finds ``view``: the session catalog's views as tables, a catalog plugin's
    (Iceberg's JDBC catalog's) in ``SHOW VIEWS`` only."""
    if spark.catalog.tableExists(view):
        return True
    namespace, _, name = view.rpartition(".")
    rows = spark.sql(f"SHOW VIEWS IN {namespace}" if namespace else "SHOW VIEWS").collect()
    return any(r.viewName == name for r in rows if not r.isTemporary)


def seen(spark, family: str) -> Dict[str, Any]:
    """What a reader of ``family`` sees through its views, and what its storage tables hold."""
    found: Dict[str, Any] = {}
    for member in ("summary", "per_user", "runs"):
        view = f"{family}_{member}"
        if shown(spark, view):
            rows = spark.table(view).groupBy("run_date", "run_id").count().collect()
            found[member] = sorted([r["run_date"], r["run_id"], r["count"]] for r in rows)
        if spark.catalog.tableExists(f"{view}_data"):
            # The (night, run) pairs the storage table holds rows of: asked of its rows, as a V2
            # table (Iceberg, Delta) has no partitions to show.
            parts = spark.table(f"{view}_data").select("run_date", "run_id").distinct().collect()
            found[f"{member}_data"] = sorted(f"run_date={r[0]}/run_id={r[1]}" for r in parts)
    if shown(spark, f"{family}_summary"):
        rows = spark.table(f"{family}_summary").collect()
        found["figures"] = sorted([r["run_date"], r["k"], r["users"], r["mean_ndcg"]] for r in rows)
    return found


def settings(job: Sequence[str]) -> List[tuple]:
    pairs = [job[i + 1].split("=", 1) for i, a in enumerate(job) if a == "--conf"]
    return [(k, v) for k, v in pairs]


def main(argv: Sequence[str]) -> int:
    seen_path, step, pause_file, *rest = argv
    first = rest[:1] == ["--first"]
    rest = rest[1:] if first else rest
    if rest[:1] != ["--"]:
        raise SystemExit("usage: python -m tests.table_faults SEEN STEP PAUSE [--first] -- JOB_ARGS...")
    job = list(rest[1:])
    from pyspark.sql import SparkSession

    quiet = f"-Dlog4j2.configurationFile=file:{Path(__file__).parent / 'data' / 'log4j2-tests.properties'}"
    builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
    builder = builder.config("spark.driver.extraJavaOptions", quiet).config("spark.ui.showConsoleProgress", "false")
    spark = builder.config(map=dict(settings(job))).getOrCreate()
    family = job[job.index("--output-table") + 1]
    # The family's schema, as its team creates it before the first night (the job creates none).
    if "." in family:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {family.rsplit('.', 1)[0]}")
    record = {"before": seen(spark, family)}
    with open(seen_path, "w") as fh:
        json.dump(record, fh)
    if first:
        record["first"] = run(job)
        with open(seen_path, "w") as fh:
            json.dump(record, fh)
    if step != "-":
        pause = pausing_at(step, pause_file)

        def hook(at: str) -> None:
            if at == step:  # what a reader sees at the instant of the kill
                record["paused"] = seen(spark, family)
                with open(seen_path, "w") as fh:
                    json.dump(record, fh)
            pause(at)

        contract.at_step = hook
    record["code"] = run(job)
    contract.at_step = contract._no_fault
    record["after"] = seen(spark, family)
    with open(seen_path, "w") as fh:
        json.dump(record, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
