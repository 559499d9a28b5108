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

import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from ndcg_spark.job import exits, interrupts, progress
from ndcg_spark.job.commands import tracking
from ndcg_spark.job.outputs import kinds
from ndcg_spark.job.outputs.contract import new_run_id
from ndcg_spark.job.outputs.files import check_connect
from ndcg_spark.job.result import Published, RunResult


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
