"""The command line (``ndcg-spark``, ``ndcg-spark compare``, ``ndcg-spark history`` and
``spark-submit jobs/evaluate_ndcg.py``).

It reads the config once, starts or joins a SparkSession, runs the job, prints the summary,
logs the published run to MLflow when asked, and turns every failure into one line on stderr
and an exit code (:mod:`ndcg_spark.job.exits`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
import warnings
from typing import Optional, Sequence, Tuple

from ndcg_spark.job import console, interrupts, progress
from ndcg_spark.job.commands import compare, evaluate, history, protocol, tracking, validate
from ndcg_spark.job.config.parsing import HistoryConfig, parse_config
from ndcg_spark.job.exits import EXIT_FAILURE, EXIT_OK, QualityGateFailed, classify, failure, signal_exit
from ndcg_spark.job.gates import wording
from ndcg_spark.job.result import RunResult, strict_json
from ndcg_spark.spark_support import check_spark


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
    command, config = "evaluate", None
    try:
        command = argv[0] if argv and argv[0] in ("compare", "history", "validate") else "evaluate"
        if command == "history":
            config, verbose = HistoryConfig.parse(argv[1:])
            say(history.show(None if history.reads_without_spark(config) else spark_session(config), config))
            return EXIT_OK
        if command == "validate":  # it writes nothing: any output given is beside the point
            config, verbose = parse_config(validate.with_output(argv[1:]), shown="validate")
        else:
            config, verbose = parse_config(argv[1:] if command == "compare" else argv, compare=command == "compare")
            protocol.refuse_before_spark(config)  # a local output's layout and live lock: refused before the JVM starts
        interrupts.install()
        progress.start(quiet=config.quiet)
        progress.phase("starting Spark")
        session = spark_session(config)
        interrupts.install(session)  # again: the SparkContext set its own SIGINT handler
        progress.watch(session)
        if command == "validate":
            return validated(session, config)
        ran = (compare if command == "compare" else evaluate).command(session, config)
        result = ran.result
        if interrupts.received() is not None:
            return stopped(command, config, result)
        if command == "compare":
            say(console.format_comparison(result.comparison, config.options.group_by))
        else:
            say(console.format_summary(result.metrics, config.options.group_by, result.rows))
        # Each gate's verdict, passed or failed; a failure is also the one error line on stderr.
        for _, line in wording.gate_lines(result):
            say(console.printable(line))
        say(console.printable(f"wrote {console.output_shown(config.output.shown, result)}"))
        failed = wording.failed_gates(result)
        record = console.finished_record(config, result, "quality_gate_failed" if failed else "ok")
        untracked = None
        if config.mlflow:
            progress.phase("logging to MLflow")
            record["mlflow_run_id"], untracked = track(config, ran, failed)
            if untracked and not failed:
                record["status"] = "mlflow_failed"
        # The last line on stdout, and the only one that parses as JSON: schedulers read it.
        say(strict_json(record))
        if untracked:
            print(f"ndcg-spark: error: {untracked}", file=sys.stderr, flush=True)
        if failed:
            raise QualityGateFailed(failed)
        return EXIT_FAILURE if untracked else EXIT_OK
    except BaseException as exc:  # noqa: BLE001 - every failure becomes one line and an exit code
        if isinstance(exc, KeyboardInterrupt) and interrupts.received() is None:
            raise
        if isinstance(exc, SystemExit) and exc.code == 0:  # --help was printed
            return EXIT_OK
        if interrupts.received() is not None and config is not None and command != "history":
            return stopped(command, config, None)
        # The run's sink noted a failed night for history with the same code and line.
        code, message = failure(exc, None if config is None else shown_output(config))
        if verbose:
            traceback.print_exc()
        print(f"ndcg-spark: error: {message}", file=sys.stderr)
        return code
    finally:
        progress.stop()
        if command != "history":
            interrupts.reset()


def shown_output(config) -> Optional[str]:
    """The output as messages name it: a run's (:attr:`~ndcg_spark.job.config.targets.Output.shown`),
    or ``history``'s as given."""
    output = config.output
    return output.shown if hasattr(output, "shown") else output or getattr(config, "output_table", None)


def say(text: str) -> None:
    """Print a line on stdout; a reader that has gone (``history | head -2``) ends the printing
    quietly: stdout goes to /dev/null, so neither this nor Python's last flush complains."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def validated(session, config) -> int:
    """``ndcg-spark validate``: every problem of the inputs (exit 3) or the row accounting (exit 0)."""
    code, lines, record = validate.report(validate.main(session, config))
    if interrupts.received() is not None:
        return stopped("validate", config, None)
    for line in lines:
        say(line)
    say(strict_json(record))
    if code != EXIT_OK:
        n = len(record["problems"])
        print(
            f"ndcg-spark: error: {n} problem{'s' if n > 1 else ''} in the input tables (listed above); "
            "validate wrote nothing",
            file=sys.stderr,
            flush=True,
        )
    return code


def stopped(command: str, config, result: Optional[RunResult]) -> int:
    """A run ended by SIGTERM or SIGINT: its finished line (status ``terminated`` or
    ``interrupted``), one line on stderr, and exit 143 or 130."""
    signum = interrupts.received()
    status = "terminated" if signum == signal.SIGTERM else "interrupted"
    part = config.output.partition
    where = f"{console.output_shown(config.output.shown)}" + (f" ({part.directory})" if part else "")
    if command == "validate":
        record, line = (
            {"event": "ndcg_spark.finished", "command": command, "status": status},
            "(validate writes nothing)",
        )
    elif result is not None:
        record = console.finished_record(config, result, status)
        line = f"after publishing {where}: the new result is in place"
    else:
        record = {"event": "ndcg_spark.finished", "command": command, "status": status, "output": config.output.shown}
        record["partition"] = {part.key: part.value} if part else None
        line = f"before publishing {where}: the previous result is as it was"
    record["signal"] = interrupts.name(signum)
    if command != "validate":
        record["published"] = result is not None
    print(strict_json(record), flush=True)
    print(f"ndcg-spark: error: stopped by {interrupts.name(signum)} {line}", file=sys.stderr, flush=True)
    return signal_exit(signum)


def track(config, ran: protocol.Ran, failed: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """(MLflow run id, None), or (None, one line) when logging failed.

    The run is logged after it is published, so a logging failure cannot take the result back:
    it is reported in one line (exit 1 unless a gate failed, which exits 4), and a re-run of
    the same date publishes the same result and logs it. Logging is bounded in time
    (:data:`~ndcg_spark.job.commands.tracking.BUDGET` seconds, and MLflow's own HTTP timeout and
    retries made short): an unreachable tracking server costs about a minute, not several.
    """
    outcome: dict = {}

    def log() -> None:
        try:
            if ran.unread is not None:
                raise ran.unread
            outcome["id"] = tracking.log_run(
                ran.result, experiment=config.mlflow.experiment, tracking_uri=config.mlflow.tracking_uri,
                texts=ran.texts, gate_failed=bool(failed) if ran.result.gated else None,
            )  # fmt: skip
        except BaseException as exc:  # noqa: BLE001 - whatever MLflow raises, the published result stands
            outcome["error"] = exc

    worker = threading.Thread(target=log, name="ndcg-spark-mlflow", daemon=True)
    deadline = time.monotonic() + tracking.BUDGET
    with tracking.bounded_http():
        worker.start()
        while worker.is_alive() and time.monotonic() < deadline and interrupts.received() is None:
            worker.join(0.2)
    if "id" in outcome:
        return outcome["id"], None
    if "error" in outcome:
        return None, f"MLflow logging failed: {classify(outcome['error'])[1]} (outputs were written)"
    return None, f"MLflow logging did not finish within {tracking.BUDGET:.0f} s; gave up (outputs were written)"


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

    settings = getattr(config, "spark", ())  # [spark] and --conf (history has none)
    if config.remote:
        return SparkSession.builder.remote(config.remote).config(map=dict(settings)).getOrCreate()
    builder = SparkSession.builder.appName("ndcg-spark").config(map=dict(settings))
    if config.master:
        builder = builder.master(config.master)
    if not os.environ.get("SPARK_ENV_LOADED") and "pyspark-shell" not in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        # Launched as a plain Python program: keep stderr for our one-line messages.
        log_conf = os.path.join(os.path.dirname(os.path.dirname(__file__)), "log4j2.properties")
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log_conf}")
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        with interrupts.jvm_ignoring_sigterm():
            return builder.getOrCreate()
    return builder.getOrCreate()


def entrypoint() -> None:
    """``ndcg-spark``: exit with :func:`run`'s code."""
    sys.exit(run())
