"""What differs between the Spark versions this package runs on (3.5 and 4.x), in one place.

Each difference is detected by the feature itself (a method, a module), not by comparing version
strings, so a 3.5 runtime with a feature backported behaves as the feature says. The version is
read only to tell a Spark older than the oldest supported (:func:`unsupported`; refused by
:func:`ndcg_spark.spark_support.check_spark`, so this module imports none of the package's errors).

The differences the package meets:

* ``DataType.fromDDL`` (4.0): :func:`parse_ddl` falls back to the parser ``createDataFrame`` uses.
* A ``SparkThrowable``'s condition is ``getCondition()`` in 4.0 and ``getErrorClass()`` before:
  :func:`error_condition` asks for either.
* ``raise_error`` throws an exception with the ``USER_RAISED_EXCEPTION`` condition in 4.0 and a
  plain ``RuntimeException`` before: :mod:`ndcg_spark._spark.failures` reads the message in both.
* The ``FAILED_READ_FILE.*`` conditions (4.0) are Spark's words before: :mod:`ndcg_spark._spark.failures`
  reads both.
* ``array_distinct`` keeps both -0.0 and 0.0 on 3.5: the ordering keys are made 0.0 where they are
  built (:mod:`ndcg_spark._stages.inputs`, :mod:`ndcg_spark._stages.scoring`), on every version (it cannot be
  asked without running a query, and it changes nothing on 4.x).
* ``Observation`` over Spark Connect (4.0): :func:`observes` says whether a DataFrame's rows can be
  counted on a pass it makes anyway; where not, :mod:`ndcg_spark._spark.counts` counts them with a pass
  of their own.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Optional, Tuple

#: The oldest Spark this package runs on, and how it is written in messages.
OLDEST = (3, 5)
SUPPORTED = "3.5 or 4.x"


def version_tuple(version: str) -> Optional[Tuple[int, int]]:
    """(major, minor) of a version such as ``3.5.9`` or ``4.1.0-SNAPSHOT``; None when unreadable.

    Examples
    --------
    >>> version_tuple("3.5.9"), version_tuple("4.1.0.dev1"), version_tuple("unknown")
    ((3, 5), (4, 1), None)
    """
    found = re.match(r"\s*(\d+)\.(\d+)", str(version))
    return (int(found.group(1)), int(found.group(2))) if found else None


def unsupported(version: str, found: str = "PySpark {} is installed") -> Optional[str]:
    """One line saying that Spark ``version`` is too old to run on, or None when it is not.

    ``found`` words where the version was found. A version that does not read as one (a
    vendor's build string) is let through: the features are then what decides.

    Examples
    --------
    >>> unsupported("3.4.1")
    'PySpark 3.4.1 is installed; ndcg-spark needs Spark 3.5 or 4.x'
    >>> unsupported("3.5.0") is None and unsupported("4.3.0") is None
    True
    """
    parsed = version_tuple(version)
    if parsed is None or parsed >= OLDEST:
        return None
    return f"{found.format(version)}; ndcg-spark needs Spark {SUPPORTED}"


def parse_ddl(ddl: str, spark=None):
    """The :class:`~pyspark.sql.types.DataType` of a DDL string (``"user_id int, score double"``).

    A struct for a list of columns, the type itself for one type (``"int"``). Needs a session:
    ``spark``, or else the active one.
    """
    from pyspark.sql import types as T

    if hasattr(T.DataType, "fromDDL"):
        return T.DataType.fromDDL(ddl)
    if spark is not None and is_connect(spark):
        # 3.5 over Spark Connect: the server parses it, as createDataFrame has it do for a schema.
        return spark.client._analyze(method="ddl_parse", ddl_string=ddl).parsed
    # 3.5 classic: the parser that createDataFrame uses for a schema given as text, on the JVM.
    return T._parse_datatype_string(ddl)


def error_condition(error) -> Optional[str]:
    """The error condition of a Spark exception (Python or Java); raises when it has none.

    4.0 names the method ``getCondition``; 3.5 has only ``getErrorClass`` (4.x keeps it, deprecated).
    """
    method = getattr(error, "getCondition", None)
    if method is None:
        method = error.getErrorClass
    try:
        return method()
    except Exception:  # noqa: BLE001 - a Java object on 3.5: py4j resolves getCondition only when called
        return error.getErrorClass()


def is_connect(df) -> bool:
    """Whether a DataFrame (or session) is Spark Connect's."""
    return type(df).__module__.startswith("pyspark.sql.connect")


def observes(df) -> bool:
    """Whether an ``Observation`` can count ``df``'s rows on a pass that reads it anyway.

    Classic sessions can on every supported version; Spark Connect from 4.0, whose client has
    an observation of its own (on 3.5 the client refuses to read one back, and two unnamed
    observations of one plan collide on the server).
    """
    return not is_connect(df) or importlib.util.find_spec("pyspark.sql.connect.observation") is not None
