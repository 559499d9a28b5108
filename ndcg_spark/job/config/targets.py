"""Where a run writes, logs and how its session starts: the partition it owns (:class:`Partition`),
the output directory or table family (:class:`Output`), the MLflow experiment
(:class:`MlflowTarget`) and the Spark settings of ``[spark]`` and ``--conf`` (:func:`spark_settings`).
Built once by :mod:`ndcg_spark.job.config.parsing`; this module imports nothing else of the job.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

from ndcg_spark.errors import ConfigError

#: Seconds a lock's lease may go unrenewed before the next run breaks it (``lock_timeout``).
LOCK_TIMEOUT = 300
#: ``break_lock = "force"``: break a live run's lock too.
FORCE = "force"

#: Characters Spark escapes in partition directory names (and the space, which tools mangle).
UNSAFE_PARTITION_CHARS = "\"#%'*/:=?\\{}[]^ "
#: The partition key of a dated run (``--run-date``), and how its value is written.
RUN_DATE = "run_date"
DATE_FORM = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
#: Spark settings whose values are never recorded (a manifest is read by more people than the config).
SECRET_SETTING = re.compile(r"secret|password|token|credential|access\.key", re.IGNORECASE)


@dataclass(frozen=True)
class Partition:
    """The output partition a run owns: ``key=value``, a directory of each table."""

    key: str
    value: str

    def __post_init__(self) -> None:
        text = f"{self.key}={self.value}"
        if not self.key or not self.value or "/" in self.value:
            raise ConfigError(f"partition = {text!r} must look like key=value")
        # The partition is written as the directory key=value: characters that Spark escapes in
        # partition paths would be read back as another value.
        unsafe = sorted(set(UNSAFE_PARTITION_CHARS) & set(self.key + self.value))
        if unsafe:
            raise ConfigError(f"partition = {text!r} holds characters not allowed in a partition: {' '.join(unsafe)}")
        if self.key.startswith((".", "_")):
            # Spark's file listing skips such directories: the run would be written but never read.
            raise ConfigError(f"partition = {text!r}: a partition column may not start with '.' or '_'")

    @property
    def directory(self) -> str:
        """``key=value``, the directory Spark's partition discovery maps to the column ``key``."""
        return f"{self.key}={self.value}"

    @classmethod
    def of_run_date(cls, run_date: Any) -> Partition:
        """``run_date=YYYY-MM-DD`` (that form only: one day, one partition)."""
        text = str(run_date)
        if not DATE_FORM.fullmatch(text) or not _is_date(text):
            raise ConfigError(f"run_date = {text!r} is not a date of the form YYYY-MM-DD")
        return cls(RUN_DATE, text)

    @classmethod
    def of_text(cls, partition: Any) -> Partition:
        """``key=value`` as written."""
        key, sep, value = str(partition).partition("=")
        if not sep:
            raise ConfigError(f"partition = {partition!r} must look like key=value")
        return cls(key.strip(), value.strip())

    @classmethod
    def parse(cls, run_date: Any = None, partition: Any = None) -> Optional[Partition]:
        """From ``run_date`` (``YYYY-MM-DD`` only: one day, one partition) or ``partition`` (key=value).

        Examples
        --------
        >>> Partition.parse(run_date="2026-11-21").directory
        'run_date=2026-11-21'
        >>> Partition.parse(run_date="20261121")
        Traceback (most recent call last):
        ...
        ndcg_spark.errors.ConfigError: run_date = '20261121' is not a date of the form YYYY-MM-DD
        """
        if run_date is not None and partition is not None:
            raise ConfigError("give run_date or partition, not both")
        if run_date is not None:
            return cls.of_run_date(run_date)
        return None if partition is None else cls.of_text(partition)


def _is_date(text: str) -> bool:
    import datetime

    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


#: ``output_table_format``: the formats a table family may be created in (None: the catalog's default).
TABLE_FORMATS = ("parquet", "delta", "iceberg")


@dataclass(frozen=True)
class Output:
    """Where a run writes: the directory (``path``) or the family of catalog tables (``table``),
    exactly one of them; the partition it owns, and what it may do there."""

    path: Optional[str]
    partition: Optional[Partition] = None
    report: bool = True
    #: False, True (break a lock whose lease is stalled) or ``"force"`` (break any lock).
    break_lock: Union[bool, str] = False
    #: Seconds a lock's lease may go unrenewed before the next run breaks it.
    lock_timeout: float = LOCK_TIMEOUT
    #: The family of catalog tables (``db.ndcg``: ``db.ndcg_summary``, ...) instead of a directory.
    table: Optional[str] = None
    #: The format the tables are created in (:data:`TABLE_FORMATS`; None: the catalog's default).
    table_format: Optional[str] = None

    def __post_init__(self) -> None:
        if self.path is not None and self.table is not None:
            raise ConfigError("give output (a directory) or output_table (catalog tables), not both")
        if self.table is None:
            required("output", self.path)
        elif not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}", self.table):
            raise ConfigError(
                f"output_table = {self.table!r} is not a table name: [catalog.][database.]name, "
                "letters, digits and underscores"
            )
        elif self.partition is None:
            raise ConfigError("output_table needs --run-date or --partition: each run publishes one partition")
        if self.table_format is not None and self.table_format not in TABLE_FORMATS:
            raise ConfigError(f"output_table_format = {self.table_format!r} is not one of {', '.join(TABLE_FORMATS)}")
        if self.table_format is not None and self.table is None:
            raise ConfigError("output_table_format is for output_table, not for an output directory")
        if self.break_lock not in (True, False, FORCE):
            raise ConfigError(f"break_lock must be true, false or {FORCE!r}, got {self.break_lock!r}")
        timeout = self.lock_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 1 <= timeout <= 86400:
            raise ConfigError(f"lock_timeout must be a number of seconds from 1 to 86400, got {timeout!r}")

    @property
    def shown(self) -> str:
        """The output as messages name it before the run qualifies it: the table family's name, a
        URI as given, a local path made absolute."""
        if self.table is not None:
            return self.table
        path = self.path or ""
        return path if "://" in path or path.startswith("file:") else os.path.abspath(path)


def spark_settings(value: Any) -> Tuple[Tuple[str, str], ...]:
    """The Spark settings of ``[spark]`` (a TOML table) and ``--conf key=value`` (a list), in order,
    as (key, text) pairs; a later value of a key replaces an earlier one.

    Examples
    --------
    >>> spark_settings({"spark.sql.catalogImplementation": "hive", "spark.sql.shuffle.partitions": 8})
    (('spark.sql.catalogImplementation', 'hive'), ('spark.sql.shuffle.partitions', '8'))
    >>> spark_settings(["spark.sql.warehouse.dir=/data/wh"])
    (('spark.sql.warehouse.dir', '/data/wh'),)
    """
    if value is None:
        return ()
    items = []
    for item in value.items() if isinstance(value, dict) else value if isinstance(value, list) else [value]:
        if isinstance(item, tuple):
            key, setting = item
        else:
            key, sep, setting = str(item).partition("=")
            if not sep:
                raise ConfigError(f"--conf {item!r} must look like key=value")
        if isinstance(setting, (dict, list)) or not str(key).strip():
            raise ConfigError(f"spark setting {key!r} must be key = value (a string, number or boolean)")
        text = str(setting).lower() if isinstance(setting, bool) else str(setting)
        items.append((str(key).strip(), text.strip()))
    settings = dict(items)
    return tuple(settings.items())


def shown(path: str) -> str:
    """A qualified path as messages name it: ``file:/data/out`` as ``/data/out``, a URI as it is."""
    return path[len("file:") :] if path.startswith("file:/") and not path.startswith("file://") else path


def required(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name} is required (a path or a catalog table); set it in the config or as --{name}")


# ----------------------------------------------------------------------------- MLflow

#: A URI's user and password, and a Spark Connect URL's parameters that hold a secret.
_USERINFO = re.compile(r"(://)[^/@\s]+@")
_SECRET_PARAMETER = re.compile(r"(;[^;=]*(?:token|secret|password|key)[^;=]*=)[^;]*", re.IGNORECASE)
NOT_INSTALLED = "MLflow logging needs MLflow: pip install 'ndcg-spark[mlflow]' (or mlflow-skinny)"


def redact(text: str) -> str:
    """A URL without its secrets: the user and password of a URI, the value of a token parameter.

    Examples
    --------
    >>> redact("sc://host:15002/;user_id=etl;token=abc123")
    'sc://host:15002/;user_id=etl;token=<redacted>'
    >>> redact("s3a://key:secret@bucket/recs")
    's3a://bucket/recs'
    """
    return _SECRET_PARAMETER.sub(r"\1<redacted>", _USERINFO.sub(r"\1", text))


@dataclass(frozen=True)
class MlflowTarget:
    """Where the job logs its runs: an MLflow experiment and the tracking store (MLflow's own
    default, ``MLFLOW_TRACKING_URI``, when None)."""

    experiment: str
    tracking_uri: Optional[str] = None

    @classmethod
    def parse(cls, experiment: Any, tracking_uri: Any = None) -> Optional[MlflowTarget]:
        """From ``mlflow_experiment`` and ``mlflow_tracking_uri`` (None when no experiment is named).

        Asking for MLflow without it installed is a ConfigError (exit 2) here, before any data is
        read; MLflow itself is not imported.

        Examples
        --------
        >>> MlflowTarget.parse(None) is None
        True
        """
        for name, value in (("mlflow_experiment", experiment), ("mlflow_tracking_uri", tracking_uri)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigError(f"{name} must be a name or URI, got {value!r}")
        if experiment is None:
            if tracking_uri is not None:
                raise ConfigError("mlflow_tracking_uri is set without mlflow_experiment: name the experiment to log to")
            return None
        if importlib.util.find_spec("mlflow") is None:
            raise ConfigError(NOT_INSTALLED)
        return cls(experiment.strip(), tracking_uri.strip() if tracking_uri else None)
