"""The table formats' Spark sessions as teams configure them, for ``tests/test_table_formats.py``.

The official jars come from Maven Central through ``scripts/fetch_jars.sh`` into ``.jars/<line>/``
(``spark35``: Spark 3.5, Iceberg 1.10, Delta 3.3; ``spark41``: Spark 4.1, Iceberg 1.12, Delta 4.2).
A session holds one session catalog, so Iceberg's and Delta's are two setups:

* ``iceberg``: Iceberg's ``SparkSessionCatalog`` over a Hive metastore (embedded Derby), the
  family ``ev.ndcg``; Iceberg's JDBC catalog on SQLite under its own name, ``lake``
  (``lake.ev.ndcg``), which holds views; and Iceberg's hadoop catalog, ``hadoop``, which holds none;
* ``delta``: Delta's ``DeltaCatalog`` as the session catalog over a Hive metastore (Derby),
  the family ``ev.ndcg``.

Both setups put both formats' jars and SQL extensions on the session, as a platform image does;
only the session catalog differs. In one test process the setups take turns: the JVM stays, its
SparkContext is stopped and started again with the other setup's settings (the jars were on the
classpath from the start).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pyspark

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
#: The Spark lines the formats' runtimes are fetched for (``scripts/fetch_jars.sh``).
LINES = {"3.5": "spark35", "4.1": "spark41"}
SETUPS = ("iceberg", "delta")
EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,io.delta.sql.DeltaSparkSessionExtension"


def line() -> Optional[str]:
    """This PySpark's line of jars (``spark35``, ``spark41``), or None where no runtime exists for it."""
    return LINES.get(".".join(pyspark.__version__.split(".")[:2]))


def jars() -> List[str]:
    """The fetched jars of this PySpark's line (empty where they were not fetched)."""
    found = line()
    return sorted(str(p) for p in (ROOT / ".jars" / found).glob("*.jar")) if found else []


def missing() -> Optional[str]:
    """Why the format tests cannot run here, or None."""
    if line() is None:
        return f"no Iceberg and Delta runtimes are fetched for PySpark {pyspark.__version__} (3.5 and 4.1 are)"
    if len(jars()) < 4:
        return f"the format jars are not in .jars/{line()}/: run scripts/fetch_jars.sh {line()}"
    return None


def hive(base: Path) -> Dict[str, str]:
    """A Hive metastore of its own: embedded Derby and the warehouse under ``base``."""
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(base / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={base / 'metastore_db'};create=true",
    }


def settings(setup: str, base: Path) -> Dict[str, str]:
    """The Spark settings of a setup, as a team passes them (``--conf`` or ``[spark]``)."""
    common = {
        "spark.jars": ",".join(jars()),
        "spark.sql.extensions": EXTENSIONS,
        # Delta's VACUUM lists a table's folders in as many tasks as this says (10,000 by
        # default): half a minute a VACUUM of a few files.
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
        **hive(base),
    }
    if setup == "iceberg":
        return {
            **common,
            "spark.sql.catalog.spark_catalog": "org.apache.iceberg.spark.SparkSessionCatalog",
            "spark.sql.catalog.spark_catalog.type": "hive",
            # Derby has none of the metastore's lock tables.
            "spark.hadoop.iceberg.engine.hive.lock-enabled": "false",
            # A platform team's own catalog: Iceberg's JDBC catalog, its tables and views listed
            # in SQLite (the schema version that holds views).
            "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.lake.type": "jdbc",
            "spark.sql.catalog.lake.uri": f"jdbc:sqlite:{base / 'lake.db'}",
            "spark.sql.catalog.lake.jdbc.schema-version": "V1",
            "spark.sql.catalog.lake.warehouse": str(base / "lake"),
            "spark.sql.catalog.hadoop": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.hadoop.type": "hadoop",
            "spark.sql.catalog.hadoop.warehouse": str(base / "hadoop"),
        }
    if setup == "delta":
        return {
            **common,
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            # A Delta table's state is rebuilt from its log in 50 tasks by default: hundreds of
            # empty tasks a query on these few-row tables.
            "spark.databricks.delta.snapshotPartitions": "2",
        }
    raise ValueError(setup)


def on_store(conf: Dict[str, str], store) -> Dict[str, str]:
    """A setup's settings with its tables on an S3 store (:class:`tests.object_store.Store`): the
    warehouses on ``s3a://`` and S3A's settings as a team passes them (docs/cluster.md); the
    metastore (Derby) and Iceberg's JDBC catalog (SQLite) stay where they were, as a team's
    metastore service does. Delta takes its S3 log store (one writer at a time) by the scheme."""
    from tests import object_store

    return {
        **conf,
        **object_store.settings(store.endpoint),
        "spark.jars": ",".join(jars() + object_store.jars()),
        "spark.sql.warehouse.dir": store.url("warehouse"),
        "spark.sql.catalog.lake.warehouse": store.url("lake"),
        "spark.sql.catalog.hadoop.warehouse": store.url("hadoop"),
    }


def conf_flags(setup: str, base: Path, store=None) -> List[str]:
    """The setup as the job's ``--conf`` flags (a job in a process of its own), its tables on
    ``store`` when one is given."""
    conf = settings(setup, base) if store is None else on_store(settings(setup, base), store)
    return [flag for key, value in conf.items() for flag in ("--conf", f"{key}={value}")]


def session(setup: str, base: Path):
    """The setup's session in this process: a running session of another setup stops first."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(f"ndcg-spark-formats-{setup}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{DATA / 'log4j2-tests.properties'}")
    )
    return builder.config(map=settings(setup, base)).getOrCreate()
