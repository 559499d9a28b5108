"""Each run of the job as an MLflow run: its settings as parameters, its figures as metrics, its
manifest and report as artifacts, a gate's failure as a tag.

MLflow is an optional extra (``pip install 'ndcg-spark[mlflow]'``) and is imported only here,
inside the functions: the package and the job work without it.
"""

from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from ndcg_spark.compare import COMPARISON_COLUMNS
from ndcg_spark.errors import ConfigError
from ndcg_spark.evaluation import COMPANIONS
from ndcg_spark.job.config.settings import untracked
from ndcg_spark.job.config.targets import NOT_INSTALLED, redact
from ndcg_spark.job.result import RunResult, gates_summary
from ndcg_spark.options import beyond_global, beyond_per_user, k_label

#: Settings never sent to a tracking server (a Spark Connect URL may carry a token), as declared.
PRIVATE_SETTINGS = untracked()

#: Figures of a summary row logged as metrics (those present and numeric), before the
#: beyond-accuracy ones (:func:`summary_metrics`).
ACCURACY_METRICS = (
    "mean_ndcg",
    "ndcg_ci_low",
    "ndcg_ci_high",
    "mean_dcg",
    "std_ndcg",
    "users",
    "users_zero_idcg",
    "users_without_recommendations",
    "users_without_relevance",
    "users_excluded",
    *(m.summary for m in COMPANIONS),
)


def summary_metrics() -> Tuple[str, ...]:
    """Figures of a summary row logged as metrics: the accuracy ones, then the beyond-accuracy
    figures declared now: each per-user metric's mean and interval, then the figures of a whole
    segment and k."""
    beyond = (
        f"{prefix}{name}{suffix}"
        for name in beyond_per_user()
        for prefix, suffix in (("mean_", ""), ("", "_ci_low"), ("", "_ci_high"))
    )
    return (*ACCURACY_METRICS, *beyond, *beyond_global())


#: Figures of a comparison row logged as metrics: the columns of compare's report after k.
COMPARISON_METRICS = tuple(c for c, _ in COMPARISON_COLUMNS)

#: MLflow's longest parameter value on every store version (newer ones take 6000).
PARAM_LENGTH = 500
_UNSAFE = re.compile(r"[^A-Za-z0-9_\-. /]")

#: Seconds the job waits for MLflow logging after publishing, at most.
BUDGET = 60.0
#: MLflow's HTTP settings while the job logs, unless set in the environment: a request waits
#: 10 s at most, and is retried twice (MLflow's defaults: 120 s and 7 retries with backoff).
HTTP_LIMITS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
}


@contextmanager
def bounded_http() -> Iterator[None]:
    """MLflow's HTTP timeout and retries made short (:data:`HTTP_LIMITS`) while the block runs;
    a value set in the environment is kept."""
    added = [k for k in HTTP_LIMITS if k not in os.environ]
    os.environ.update({k: HTTP_LIMITS[k] for k in added})
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def store_of(tracking_uri: Optional[str]) -> str:
    """The store a client of ``tracking_uri`` opens: it, or MLflow's own choice when None (the
    environment's ``MLFLOW_TRACKING_URI``, else its local default), so a message names the store
    tried, never ``None``.

    Examples
    --------
    >>> store_of("http://mlflow:5000")
    'http://mlflow:5000'
    """
    if tracking_uri:
        return tracking_uri
    return os.environ.get("MLFLOW_TRACKING_URI") or "MLflow's default store (./mlruns or mlflow.db)"


def mlflow_client(tracking_uri: Optional[str] = None):
    """An ``MlflowClient`` of ``tracking_uri`` (MLflow's own default, e.g. ``MLFLOW_TRACKING_URI``,
    when None); a one-line ConfigError when MLflow is not installed or refuses the store (e.g.
    ``sqlite:`` with ``mlflow-skinny``, which has no database backend)."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise ConfigError(NOT_INSTALLED) from None
    try:
        return MlflowClient(tracking_uri=tracking_uri)
    except Exception as exc:  # MLflow refuses a store it has no backend for as it opens it
        raise ConfigError(f"MLflow tracking store {redact(store_of(tracking_uri))!r}: {_first_line(exc)}") from None


def safe_name(text: str) -> str:
    """``text`` with every character MLflow refuses in a metric or parameter name replaced by ``_``.

    Examples
    --------
    >>> safe_name("model=v2, country=kr")
    'model_v2_ country_kr'
    """
    return _UNSAFE.sub("_", text)


def metric_rows(result: RunResult) -> List[Tuple[str, float]]:
    """(name, value) of every figure of the run: ``mean_ndcg_at_10`` without segments,
    ``model_v2.country_kr/mean_ndcg_at_10`` with them, ``candidate_vs_baseline/...`` for compare
    (the model names made safe). ``all`` stands for the whole list; missing figures are skipped."""
    command, group_by, rows = result.command, result.group_by, result.figures
    figures = COMPARISON_METRICS if command == "compare" else summary_metrics()
    out: List[Tuple[str, float]] = []
    seen: Dict[str, int] = {}
    for row in rows:
        prefix = [f"{c}_{row.get(c)}" for c in group_by]
        if command == "compare" and row.get("candidate_model") is not None:
            prefix.insert(0, f"{row['candidate_model']}_vs_{row['baseline_model']}")
        scope = safe_name(".".join(prefix))
        for figure in figures:
            value = row.get(figure)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            name = f"{scope}/" if scope else ""
            name += f"{figure}_at_{k_label(row.get('k'))}"
            # Two segments that read the same once made safe keep apart by a suffix, in row order.
            seen[name] = seen.get(name, 0) + 1
            out.append((name if seen[name] == 1 else f"{name}_{seen[name]}", float(value)))
    return out


def param_rows(result: RunResult) -> List[Tuple[str, str]]:
    """(name, value) of the run's settings (every one set, lists joined by commas, URIs without
    credentials, ``remote`` left out), its partition and the Spark version."""
    params = {"command": result.command}
    for key, value in sorted(result.settings.items()):
        if key in PRIVATE_SETTINGS or value is None or value == [] or value == {}:
            continue
        if isinstance(value, (list, tuple)):
            text = ",".join(str(v) for v in value)
        elif isinstance(value, dict):
            text = json.dumps(value, sort_keys=True)
        else:
            text = str(value)
        params[key] = redact(text)[:PARAM_LENGTH]
    for key, value in (result.partition or {}).items():
        params[key] = str(value)
    if result.spark_version:
        params["spark_version"] = str(result.spark_version)
    return [(safe_name(k), v) for k, v in params.items()]


def log_run(
    result: RunResult,
    *,
    experiment: str,
    tracking_uri: Optional[str] = None,
    artifacts: Sequence[str] = (),
    texts: Optional[Mapping[str, str]] = None,
    gate_failed: Optional[bool] = None,
    run_name: Optional[str] = None,
) -> str:
    """Log one run of the job as an MLflow run (created, filled, then marked finished).

    Parameters
    ----------
    result : RunResult
        The run (its manifest is ``summary.json``, or ``comparison.json`` for ``compare``).
    experiment : str
        The MLflow experiment, created when it does not exist.
    tracking_uri : str, optional
        The tracking store; MLflow's own default when None (``MLFLOW_TRACKING_URI``).
    artifacts : sequence of str
        Local files to attach (``report.html``); a missing one is skipped.
    texts : mapping of str to str, optional
        Artifacts given as text, by file name, e.g. a report written to a remote file system.
        The manifest itself is always attached, as ``summary.json`` (``comparison.json``),
        unless a file of that name is among ``artifacts`` or ``texts``.
    gate_failed : bool, optional
        Whether a gate failed: the tag ``ndcg_spark.gate`` is ``failed`` or ``passed`` (not set
        when None).
    run_name : str, optional
        The MLflow run's name; ``<command> <partition>`` (or the command) by default.

    Returns
    -------
    str
        The MLflow run id.

    Raises
    ------
    ConfigError
        MLflow is not installed, or the tracking store refuses the experiment or the run.
    """
    client = mlflow_client(tracking_uri)
    from mlflow.entities import Metric, Param
    from mlflow.exceptions import MlflowException

    command = result.command
    partition = ", ".join(f"{k}={v}" for k, v in (result.partition or {}).items())
    tags = {"ndcg_spark.command": command}
    if partition:
        tags["ndcg_spark.partition"] = partition
    if gate_failed is not None:
        tags["ndcg_spark.gate"] = "failed" if gate_failed else "passed"
    if result.gated:
        tags["ndcg_spark.gates"] = gates_summary(result)
    try:
        found = client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found else client.create_experiment(experiment)
        run = client.create_run(
            experiment_id, tags=tags, run_name=run_name or " ".join(filter(None, (command, partition)))
        )
    except MlflowException as exc:
        raise ConfigError(f"MLflow tracking store {client.tracking_uri!r}: {_first_line(exc)}") from None
    run_id = run.info.run_id
    try:
        params = [Param(k, v) for k, v in param_rows(result)]
        metrics = [Metric(k, v, _now_ms(), 0) for k, v in metric_rows(result)]
        # MLflow takes at most 100 parameters and 1000 metrics in one batch.
        for chunk in _chunks(params, 100):
            client.log_batch(run_id, params=chunk)
        for chunk in _chunks(metrics, 1000):
            client.log_batch(run_id, metrics=chunk)
        texts = dict(texts or {})
        named = {os.path.basename(p) for p in artifacts} | set(texts)
        own = "comparison.json" if command == "compare" else "summary.json"
        if own not in named:
            texts[own] = json.dumps(result.to_json(), indent=2, default=str) + "\n"
        for path in artifacts:
            if os.path.isfile(path):
                client.log_artifact(run_id, path)
        for name, text in texts.items():
            client.log_text(run_id, text, name)
    except BaseException:
        client.set_terminated(run_id, "FAILED")
        raise
    client.set_terminated(run_id, "FINISHED")
    return run_id


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "message", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def _chunks(items: List[Any], size: int) -> Iterable[List[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
