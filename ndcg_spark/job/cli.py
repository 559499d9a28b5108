"""The command line (``ndcg-spark``, ``ndcg-spark compare``, ``ndcg-spark history`` and
``spark-submit jobs/evaluate_ndcg.py``).

It reads the config once, starts or joins a SparkSession, runs the job, prints the summary,
logs the published run to MLflow when asked, and turns every failure into one line on stderr
and an exit code (:mod:`ndcg_spark.errors`).
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from typing import Optional, Sequence, Tuple

from ndcg_spark._compat import check_spark
from ndcg_spark.errors import EXIT_FAILURE, EXIT_OK, QualityGateFailed, as_error
from ndcg_spark.job import console, history, pipeline
from ndcg_spark.job.config import parse_config
from ndcg_spark.job.history import HistoryConfig
from ndcg_spark.job.storage import strict_json


def run(argv: Optional[Sequence[str]] = None) -> int:
    """Command-line entry point; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in argv
    with warnings.catch_warnings():
        if not verbose:
            # Libraries' notices (pyspark's about pandas, for one) would come before our one line.
            warnings.simplefilter("ignore")
        return _run(argv, verbose)


def _run(argv: Sequence[str], verbose: bool) -> int:
    try:
        command = argv[0] if argv and argv[0] in ("compare", "history") else "evaluate"
        if command == "history":
            config, verbose = HistoryConfig.parse(argv[1:])
            print(history.show(spark_session(config), config), flush=True)
            return EXIT_OK
        config, verbose = parse_config(argv[1:] if command == "compare" else argv, compare=command == "compare")
        session = spark_session(config)
        if command == "compare":
            manifest = pipeline.compare_main(session, config)
            print(console.format_comparison(manifest["comparison"], config.options.group_by))
        else:
            manifest = pipeline.main(session, config)
            print(console.format_summary(manifest["metrics"], config.options.group_by, manifest["rows"]))
            drop = manifest.get("regression_gate")
            if drop and not any(not g["passed"] for g in drop["gates"]):  # a failure is the error line on stderr
                print(console.printable(drop["message"]))
        print(console.printable(f"wrote {shown_path(config.output.path)}"))
        failed = pipeline.failed_gates(command, manifest)
        record = console.finished_record(command, config, manifest, "quality_gate_failed" if failed else "ok")
        untracked = None
        if config.mlflow:
            record["mlflow_run_id"], untracked = track(session, config, manifest, failed)
            if untracked and not failed:
                record["status"] = "mlflow_failed"
        # The last line on stdout, and the only one that parses as JSON: schedulers read it.
        print(strict_json(record), flush=True)
        if untracked:
            print(f"ndcg-spark: error: {untracked}", file=sys.stderr, flush=True)
        if failed:
            raise QualityGateFailed(failed)
        return EXIT_FAILURE if untracked else EXIT_OK
    except BaseException as exc:  # noqa: BLE001 - every failure becomes one line and an exit code
        if isinstance(exc, KeyboardInterrupt):
            raise
        if isinstance(exc, SystemExit) and exc.code == 0:  # --help was printed
            return EXIT_OK
        code, message = classify_error(exc)
        if verbose:
            traceback.print_exc()
        print(f"ndcg-spark: error: {message}", file=sys.stderr)
        return code


def track(spark, config, manifest, failed: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """(MLflow run id, None), or (None, one line) when logging failed.

    The run is logged after it is published, so a logging failure cannot take the result back:
    it is reported in one line (exit 1 unless a gate failed, which exits 4), and a re-run of
    the same date publishes the same result and logs it.
    """
    gated = bool(manifest.get("quality_gates") or manifest.get("regression_gate") or manifest.get("non_inferiority"))
    try:
        return pipeline.track(spark, config, manifest, bool(failed) if gated else None), None
    except Exception as exc:  # noqa: BLE001 - whatever MLflow raises, the published result stands
        return None, f"MLflow logging failed: {classify_error(exc)[1]} (outputs were written)"


def classify_error(exc: BaseException) -> Tuple[int, str]:
    """Exit code and one-line message for any exception the job can meet (:func:`~ndcg_spark.errors.as_error`)."""
    error = as_error(exc)
    return error.exit_code, str(error).splitlines()[0]


def shown_path(path: str) -> str:
    """An output path as printed: a local path made absolute, a URI as given."""
    return path if "://" in path or path.startswith("file:") else os.path.abspath(path)


def spark_session(config):
    """Join the session spark-submit started, or start a local one with quiet logs.

    A Spark older than the package supports stops here, before and after the session starts
    (a Spark Connect server may be older than its client): one line, exit code 2.
    """
    check_spark()
    session = _start_session(config)
    check_spark(session)
    return session


def _start_session(config):
    from pyspark.sql import SparkSession

    if config.remote:
        return SparkSession.builder.remote(config.remote).getOrCreate()
    builder = SparkSession.builder.appName("ndcg-spark")
    if config.master:
        builder = builder.master(config.master)
    if not os.environ.get("SPARK_ENV_LOADED") and "pyspark-shell" not in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        # Launched as a plain Python program: keep stderr for our one-line messages.
        log_conf = os.path.join(os.path.dirname(os.path.dirname(__file__)), "log4j2.properties")
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log_conf}")
        builder = builder.config("spark.ui.showConsoleProgress", "false")
    return builder.getOrCreate()


def entrypoint() -> None:
    """``ndcg-spark``: exit with :func:`run`'s code."""
    sys.exit(run())
