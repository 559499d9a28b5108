"""The catalog a family of tables lives in, and what its tables are.

A family is named as its users write table names: ``catalog.schema.table`` (Unity Catalog,
Iceberg's and Delta's catalogs; ``spark_catalog.ev.ndcg`` for the session catalog), or
``schema.table`` in the session's current catalog. This module says, before anything is
computed, whether the session has that catalog, whether the catalog can create the format asked
for and hold the views the whole-night guarantee needs; then, per table, whether it is V1
(partitions in a Hive metastore, dropped by ``ALTER TABLE ... DROP PARTITION``) or V2 (Iceberg,
Delta, any table of a catalog plugin: rows removed by ``DELETE``); and where the family's lock
lives: with its tables, wherever the job is started from.

What each format and catalog accepts, tried on Spark 3.5.9 with Iceberg 1.10.2 and Delta 3.3.3
and on Spark 4.1.4 with Iceberg 1.12.0 and Delta 4.2.0 (docs/job.md's table section):

* ``SHOW PARTITIONS``, ``ALTER TABLE ... DROP PARTITION``: V1 tables only; Iceberg's and Delta's
  raise ``INVALID_PARTITION_OPERATION.PARTITION_MANAGEMENT_IS_UNSUPPORTED``;
* ``DELETE FROM ... WHERE``: Iceberg and Delta; a V1 table raises
  ``UNSUPPORTED_FEATURE.TABLE_OPERATION``;
* ``DESCRIBE TABLE EXTENDED``: its ``Provider`` row says ``iceberg``, ``delta``, or ``parquet``,
  ``hive``... for a V1 table, in every catalog;
* ``CREATE VIEW``: the session catalog (Hive) over either format; Iceberg's hadoop catalog
  refuses (``UnsupportedOperationException: Creating a view is not supported by catalog: lake``,
  with no error condition), and ``SHOW VIEWS`` there answers an empty list, so only creating one
  tells; Iceberg's JDBC catalog (``jdbc.schema-version = V1``) holds views, which
  ``spark.catalog.tableExists`` answers False for and ``SHOW VIEWS`` lists;
* a first part that is no catalog (``nocat.ev.t``) is read as a namespace of the session catalog
  (``REQUIRES_SINGLE_PART_NAMESPACE``; writing it, ``_LEGACY_ERROR_TEMP_1310``);
* appending to an existing Iceberg or Delta table with another format named fails
  (``_LEGACY_ERROR_TEMP_1159``); ``DataFrameWriterV2.append`` takes the table's own.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from typing import Dict, Iterator, Optional

from ndcg_spark.errors import ConfigError, NdcgError, SparkGone, as_error, first_line, without_java_classes

SESSION_CATALOG = "spark_catalog"
#: The providers whose tables change rows by ``DELETE`` (V2 tables of the session catalog).
V2_PROVIDERS = ("iceberg", "delta")
ICEBERG_PACKAGE = "org.apache.iceberg."
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
#: Per format: a class its jar holds, and what a session needs to create its tables.
NEEDS = {
    "iceberg": (
        "org.apache.iceberg.spark.SparkCatalog",
        "Iceberg's Spark runtime jar (org.apache.iceberg:iceberg-spark-runtime-<spark>_<scala>) and an Iceberg "
        "catalog: spark.sql.catalog.spark_catalog = org.apache.iceberg.spark.SparkSessionCatalog, or "
        "spark.sql.catalog.<name> = org.apache.iceberg.spark.SparkCatalog",
    ),
    "delta": (
        DELTA_CATALOG,
        "Delta's jars (io.delta:delta-spark_<scala> and io.delta:delta-storage), "
        f"spark.sql.extensions = io.delta.sql.DeltaSparkSessionExtension and spark.sql.catalog.spark_catalog = {DELTA_CATALOG}",
    ),
}


@dataclass(frozen=True)
class TableName:
    """``[catalog.][schema.]table`` as written; ``catalog`` None: the session's current catalog."""

    written: str
    catalog: Optional[str]
    schema: Optional[str]

    @classmethod
    def parse(cls, written: str) -> TableName:
        """
        Examples
        --------
        >>> TableName.parse("lake.ev.ndcg").namespace, TableName.parse("ev.ndcg").namespace
        ('lake.ev', 'ev')
        """
        parts = written.split(".")
        return cls(written, parts[0] if len(parts) == 3 else None, parts[-2] if len(parts) > 1 else None)

    def resolved(self, spark) -> TableName:
        """The name with the catalog and schema Spark resolves it in now filled in (the session's
        current ones), as written otherwise: every statement then names the family's own catalog,
        whatever catalog or schema is current when it runs.

        Examples
        --------
        >>> TableName.parse("lake.ev.ndcg").resolved(None).qualified
        'lake.ev.ndcg'
        """
        if self.catalog is not None:
            return self
        schema = self.schema if self.schema is not None else spark.catalog.currentDatabase()
        return TableName(self.written, spark.catalog.currentCatalog(), schema)

    @property
    def table(self) -> str:
        return self.written.split(".")[-1]

    @property
    def qualified(self) -> str:
        """``catalog.schema.table`` (of a resolved name)."""
        return ".".join(p for p in (self.catalog, self.schema, self.table) if p is not None)

    @property
    def namespace(self) -> Optional[str]:
        """``catalog.schema`` or ``schema``, as ``spark.catalog.getDatabase`` takes it."""
        if self.schema is None:
            return None
        return f"{self.catalog}.{self.schema}" if self.catalog else self.schema

    @property
    def in_session_catalog(self) -> bool:
        return self.catalog in (None, SESSION_CATALOG)

    @property
    def catalog_shown(self) -> str:
        return self.catalog or SESSION_CATALOG


def catalog_class(spark, catalog: str) -> Optional[str]:
    """The class configured for ``catalog`` (``spark.sql.catalog.<name>``), None where none is."""
    try:
        return spark.conf.get(f"spark.sql.catalog.{catalog}", None)
    except Exception:  # noqa: BLE001 - a platform that hides a setting: nothing known
        return None


def check_catalog(spark, name: TableName) -> None:
    """Refuse a three-part name whose first part is no catalog of the session (exit 2)."""
    if not name.in_session_catalog and catalog_class(spark, name.catalog) is None:
        raise ConfigError(
            f"output_table {name.written}: the session has no catalog '{name.catalog}'; configure it "
            f"(spark.sql.catalog.{name.catalog} = its class, and its options) or name a table of the session "
            "catalog (schema.table)"
        )


def _loads(spark, cls: str) -> Optional[bool]:
    """Whether the driver can load ``cls``; None where this process has no JVM (Spark Connect)."""
    jvm = getattr(getattr(spark, "sparkContext", None), "_jvm", None) if not _is_connect(spark) else None
    if jvm is None:
        return None
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(cls, False, loader)
        return True
    except Exception:  # noqa: BLE001 - ClassNotFoundException, through Py4J
        return False


def _is_connect(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def check_format(spark, name: TableName, table_format: Optional[str]) -> None:
    """Refuse a format the session cannot create tables in (exit 2): its jar is missing, or the
    catalog is the other format's."""
    if table_format not in NEEDS:
        return
    cls, needs = NEEDS[table_format]
    prefix = f"output_table_format = '{table_format}'"
    if _loads(spark, cls) is False:
        raise ConfigError(
            f"{prefix}: this session has no {table_format.capitalize()} on its classpath; it needs {needs}"
        )
    mine = catalog_class(spark, name.catalog_shown) or ""
    theirs = (table_format == "delta" and mine.startswith(ICEBERG_PACKAGE)) or (
        table_format == "iceberg" and not mine.startswith(ICEBERG_PACKAGE)
    )
    if theirs:
        what = f"is {mine}" if mine else "is Spark's own"
        raise ConfigError(f"{prefix}: catalog '{name.catalog_shown}' {what}, which cannot create {table_format} tables; "
                          f"{table_format} tables need {needs}")  # fmt: skip


def check_views(spark, name: TableName, probe_in: str) -> None:
    """Refuse a catalog that cannot hold views (Iceberg's hadoop catalog): readers see whole
    nights through views only. A view is created and dropped to ask (nothing else tells)."""
    view = f"{probe_in}_ndcg_probe_{uuid.uuid4().hex[:8]}"
    try:
        spark.sql(f"CREATE VIEW {view} AS SELECT 1 AS probe")
    except Exception as exc:  # noqa: BLE001 - read by what it says
        error = as_error(exc)
        if isinstance(error, SparkGone):
            raise error from exc
        text = first_line(exc)
        if "view" not in text.lower():
            raise
        raise ConfigError(
            f"output_table {name.written}: catalog '{name.catalog_shown}' cannot hold views ({text}), and readers "
            "see whole nights only through views; use a catalog that holds views (the session catalog, "
            "Iceberg's Hive, JDBC, REST or Glue catalog, Unity Catalog)"
        ) from None
    spark.sql(f"DROP VIEW IF EXISTS {view}")


def provider(spark, table: str) -> Optional[str]:
    """A table's provider (``iceberg``, ``delta``, ``parquet``, ``hive``...), lower case."""
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect():
        if row[0] == "Provider":
            return (row[1] or "").strip().lower() or None
    return None


class Kinds:
    """Whether each table of a family is V2, asked of the table once."""

    def __init__(self, spark, name: TableName):
        self.spark, self.name = spark, name
        self._v2: Dict[str, bool] = {}

        self._providers: Dict[str, Optional[str]] = {}

    def provider(self, table: str) -> Optional[str]:
        if table not in self._providers:
            self._providers[table] = provider(self.spark, table)
        return self._providers[table]

    def v2(self, table: str) -> bool:
        if table not in self._v2:
            # A catalog plugin's tables have no partitions to manage; the session catalog's are
            # V1 unless their provider is a V2 format.
            self._v2[table] = not self.name.in_session_catalog or self.provider(table) in V2_PROVIDERS
        return self._v2[table]


def lock_location(spark, name: TableName) -> str:
    """Where the family's tables live: its namespace's location in its catalog; else the
    catalog's warehouse (``spark.sql.catalog.<name>.warehouse``) or the session's."""
    with contextlib.suppress(Exception):  # a catalog without namespaces' locations
        namespace = name.namespace or spark.catalog.currentDatabase()
        location = spark.catalog.getDatabase(namespace).locationUri
        if location:
            return location
    if not name.in_session_catalog:
        warehouse = spark.conf.get(f"spark.sql.catalog.{name.catalog}.warehouse", None)
        if warehouse:
            return f"{warehouse.rstrip('/')}/{name.schema}" if name.schema else warehouse
    return spark.conf.get("spark.sql.warehouse.dir")


@contextlib.contextmanager
def catalog_step(name: TableName, what: str) -> Iterator[None]:
    """A catalog that fails mid-run: one plain line (exit 1), never a Java class as the message."""
    try:
        yield
    except NdcgError:
        raise
    except Exception as exc:  # noqa: BLE001 - said in one line
        error = as_error(exc)
        if isinstance(error, SparkGone):
            raise error from exc
        text = without_java_classes(first_line(exc)) or type(exc).__name__
        raise NdcgError(
            f"output_table {name.written}: catalog '{name.catalog_shown}' failed to {what}: {text}",
            parameters={"catalog": name.catalog_shown, "step": what, "message": text},
        ) from exc
