"""The run protocol every command that writes shares: the refusals before Spark starts, then
check -> lock -> recover -> stage -> publish through the output's sink.

The sink (:mod:`ndcg_spark.job.outputs`: a directory or a family of catalog tables) is made once,
here, and never leaves the run: it checks that the run fits the output, holds the run's place
(the output or its partition), takes the named frames and files the command computes, and
publishes them whole with the run's result. Bad input stops the run before anything is
published, so the previous result stays as it was; a failed run is noted by the sink for
``history``. The drop gate and the trend read earlier runs from the same sink.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from ndcg_spark.job import exits, interrupts, progress
from ndcg_spark.job.commands import tracking
from ndcg_spark.job.outputs import kinds
from ndcg_spark.job.outputs.contract import new_run_id
from ndcg_spark.job.outputs.files import check_connect
from ndcg_spark.job.result import Published, RunResult

#: The session settings of a command's computation (each restored after it), and why.
#:
#: - ``spark.sql.execution.useObjectHashAggregateExec = false``: the lists collected by sort-based
#:   aggregation. Spark's hash aggregation of ``collect_list`` falls back to sorting past 128 users
#:   a task, spilling on both sides of the shuffle, and the join then sorts the judged lists once
#:   more; sorted first, they are aggregated in the join's order: at 400,000 users the run spills
#:   1,092 MB where it spilled 1,731 MB (P: 1,240 MB) for the same task CPU (docs/benchmarks.md).
#: - ``spark.sql.codegen.hugeMethodLimit = 8000``: a stage whose generated code holds a method
#:   past 8,000 bytes of bytecode (the JVM never compiles such a method: it runs interpreted) is
#:   run without whole-stage code generation instead (Spark's default limit, 65,535, is the class
#:   file's). The scoring's stage passes it with several cutoffs (8,632 bytes at k = 5, 10, 20 and
#:   the whole list) and the per-user beyond-accuracy metrics with most of them asked (11,033 bytes
#:   at one cutoff): at 100,000 users, NDCG at those four cutoffs took 14.2-14.4 s of task CPU
#:   against 18.3-21.2 s, and every beyond-accuracy metric (category similarity, k = 10) 63.9-65.0 s
#:   against 105.7-113.1 s (docs/benchmarks.md).
RUN_SETTINGS = {
    "spark.sql.execution.useObjectHashAggregateExec": "false",
    "spark.sql.codegen.hugeMethodLimit": "8000",
}


@contextlib.contextmanager
def run_settings(spark):
    """:data:`RUN_SETTINGS` for the run, the session's own settings restored after."""
    before = {key: spark.conf.get(key, None) for key in RUN_SETTINGS}
    for key, value in RUN_SETTINGS.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)


def refuse_before_spark(config) -> None:
    """Refuse, before the JVM starts, what needs no Spark to see: a path Spark Connect would
    resolve on the server, an MLflow store that cannot be opened (exit 2), and a run that the
    output would refuse (a local directory's layout, exit 2, or live lock, exit 5). Config errors
    come earlier still, from the flags and the TOML file."""
    check_connect(None, config)
    if config.mlflow:
        tracking.mlflow_client(config.mlflow.tracking_uri)
    kinds.refuse_early(config)


@dataclass(frozen=True)
class Ran:
    """A published run: its result, and (when MLflow is asked for) the manifest and report as
    published, read back from the sink right after publishing, or why they could not be."""

    result: RunResult
    texts: Optional[Dict[str, str]] = None
    unread: Optional[BaseException] = None


def run(spark, config, compute: Callable) -> Ran:
    """The sink made once, then :func:`publish_run`; a run that fails is noted by the sink (not one
    stopped by a signal, nor a failure to make the sink)."""
    sink = kinds.sink_for(spark, config)
    try:
        result = publish_run(spark, config, sink, compute)
    except BaseException as exc:
        if interrupts.received() is None and not isinstance(exc, KeyboardInterrupt):
            sink.note_failure(*exits.failure(exc, config.output.shown))
        raise
    if not config.mlflow:
        return Ran(result)
    try:
        return Ran(result, sink.texts(result))
    except Exception as exc:  # noqa: BLE001 - reported as MLflow's failure: the result is published
        return Ran(result, None, exc)


def publish_run(spark, config, sink: Any, compute: Callable) -> RunResult:
    """Check, lock, recover, compute into the sink's stage, publish: the protocol around each command."""
    started = time.time()
    if config.mlflow:
        # A store MLflow cannot open is a config error before anything is read, not after publishing.
        tracking.mlflow_client(config.mlflow.tracking_uri)
    sink.check(spark, config)
    interrupts.check()
    run_id = new_run_id()
    try:
        with sink.locked(run_id, config.output) as held:
            sink.recover()
            stage = sink.stage(spark, run_id)

            def guard() -> None:
                interrupts.check()
                held.ensure()

            try:
                with run_settings(spark):
                    computed = compute(spark, config, stage, sink.runs())
                published = Published(run_id, sink.root, held.broke, **stage.describe())
                result = computed.finished(published, round(time.time() - started, 3))
                progress.phase("publishing")
                stage.publish(result.to_json(), guard)
            finally:
                stage.discard()
    finally:
        sink.tidy()
    return result


def result_of(spark, config, read: Dict[str, Any], **computed: Any) -> RunResult:
    """The run's result before publishing: the config as run, the rows read, and what it computed."""
    part = config.output.partition
    partition = {part.key: part.value} if part else None
    return RunResult(config.command, config.to_dict(), read, spark.version, partition, **computed)
