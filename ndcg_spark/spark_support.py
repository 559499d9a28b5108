"""Which Spark this package runs on, checked before a run starts rather than found out halfway.

What differs between the supported versions is detected inside the package, feature by
feature; a client (the job, a notebook, a scheduler's wrapper) only needs to refuse a Spark that
is too old, with one line that says so.
"""

from __future__ import annotations

# The Spark versions this package runs on, as messages write them.
from ndcg_spark._spark.compat import SUPPORTED as SUPPORTED

# Whether a DataFrame or session is Spark Connect's (no JVM on this side): asked by the job too.
from ndcg_spark._spark.compat import is_connect as is_connect
from ndcg_spark._spark.compat import unsupported
from ndcg_spark.errors import ConfigError


def check_spark(spark=None) -> None:
    """Stop with one line on a Spark older than the oldest this package runs on.

    Parameters
    ----------
    spark : SparkSession, optional
        The session to check: the Spark it runs (a Spark Connect server may differ from its
        client). Without it, the installed PySpark is checked, before a session starts.

    Returns
    -------
    None
        When the Spark runs this package (a version that does not read as one, such as a
        vendor's build string, is let through).

    Raises
    ------
    ConfigError
        The Spark is too old (condition ``INVALID_CONFIG``).

    Examples
    --------
    >>> check_spark(), check_spark(spark)
    (None, None)
    """
    if spark is None:
        import pyspark

        problem = unsupported(pyspark.__version__)
    else:
        problem = unsupported(spark.version, "the session runs Spark {}")
    if problem:
        raise ConfigError(problem)
