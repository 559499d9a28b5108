"""Refusals that need no Spark: seen before the JVM starts, so a scheduler hears them in a second.

A local output (a ``file:`` URI, or a plain path that holds the job's state folder while no
cluster's default file system could be meant) is read by Python: a run that does not fit its
layout (a ``--run-date`` into an undated output, say; exit 2) and a live run's lock (exit 5) are
refused here with the same line the run would give after Spark started. Config errors come
earlier still, from the flags and the TOML file (:func:`~ndcg_spark.job.config.parse_config`).
Anything else (an output on HDFS or an object store) is checked as before, once Spark runs.
"""

from __future__ import annotations

import os
from typing import Optional
from urllib.parse import urlparse

from ndcg_spark.job import lease, publish
from ndcg_spark.job.storage import LocalFiles


def local_root(config) -> Optional[str]:
    """``file:/abs/path`` of the output when it is surely on this machine's file system, else None."""
    path, master = config.output.path, config.master
    if path is None:  # catalog tables: their catalog says where they are
        return None
    if path.startswith("file:"):
        return f"file:{os.path.normpath(urlparse(path).path)}"
    if "://" in path:
        return None
    local = os.path.abspath(path)
    # Under spark-submit, or with a cluster's master, a plain path is on the default file system.
    on_cluster = os.environ.get("SPARK_ENV_LOADED") or (master and not master.startswith("local"))
    if on_cluster and not config.remote or not os.path.isdir(os.path.join(local, publish.STATE)):
        return None
    return f"file:{local}"


def refuse(config) -> None:
    """Refuse, before Spark starts, a run that a local output's layout or live lock would refuse."""
    root = local_root(config)
    if root is None:
        return
    place = publish.Place(LocalFiles(root), config.command, config.output.partition)
    publish.check_layout(place)
    lease.refuse_if_held(place, config.output.break_lock)
