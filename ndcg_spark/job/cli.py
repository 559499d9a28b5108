"""The command line (``ndcg-spark`` and ``spark-submit jobs/evaluate_ndcg.py``).

It reads the config once, starts or joins a SparkSession, runs the job, prints the summary,
and turns every failure into one line on stderr and an exit code (:mod:`ndcg_spark.errors`).
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from typing import Optional, Sequence, Tuple

from ndcg_spark.errors import EXIT_OK, QualityGateFailed, as_error
from ndcg_spark.job import console, pipeline
from ndcg_spark.job.config import parse_config
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
        command = "compare" if argv and argv[0] == "compare" else "evaluate"
        config, verbose = parse_config(argv[1:] if command == "compare" else argv, compare=command == "compare")
        session = spark_session(config)
        if command == "compare":
            manifest = pipeline.compare_main(session, config)
            print(console.format_comparison(manifest["comparison"], config.options.group_by))
            failed = []
        else:
            manifest = pipeline.main(session, config)
            print(console.format_summary(manifest["metrics"], config.options.group_by, manifest["rows"]))
            failed = [g for g in manifest["quality_gates"] if not g["passed"]]
        print(console.printable(f"wrote {shown_path(config.output.path)}"))
        status = "quality_gate_failed" if failed else "ok"
        # The last line on stdout, and the only one that parses as JSON: schedulers read it.
        print(strict_json(pipeline.finished_record(command, config, manifest, status)), flush=True)
        if failed:
            raise QualityGateFailed(pipeline.gate_failure(failed))
        return EXIT_OK
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


def classify_error(exc: BaseException) -> Tuple[int, str]:
    """Exit code and one-line message for any exception the job can meet (:func:`~ndcg_spark.errors.as_error`)."""
    error = as_error(exc)
    return error.exit_code, str(error).splitlines()[0]


def shown_path(path: str) -> str:
    """An output path as printed: a local path made absolute, a URI as given."""
    return path if "://" in path or path.startswith("file:") else os.path.abspath(path)


def spark_session(config):
    """Join the session spark-submit started, or start a local one with quiet logs."""
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
