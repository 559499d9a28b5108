"""The job's exit codes: one table from an error's condition to a code, the job's own errors, and
the names that moved from the library with a warning."""

from __future__ import annotations

import ast
import re
import signal
from pathlib import Path

import pytest

import ndcg_spark
from ndcg_spark import errors
from ndcg_spark.errors import ConfigError, InputDataError, NdcgError, RowCheckFailed, SparkGone, as_error
from ndcg_spark.job import exits, interrupts
from ndcg_spark.job.exits import OutputLocked, QualityGateFailed, Stopped, classify, exit_code
from ndcg_spark.job.outputs import lease
from ndcg_spark.validation import INVALID_ROWS

pytestmark = pytest.mark.job  # the job's tests: left out of the library's loop (CONTRIBUTING.md)

PACKAGE = Path(ndcg_spark.__file__).parent


@pytest.mark.parametrize(
    "error, code",
    [
        (NdcgError("row accounting does not add up"), 1),
        (as_error(KeyError("k")), 1),
        (NdcgError("no JVM", condition="SPARK_DID_NOT_START"), 1),
        (ConfigError("k must hold positive integers"), 2),
        (InputDataError("relevance table is empty"), 3),
        (InputDataError("a; b", condition=INVALID_ROWS, parameters={"problems": ["a", "b"]}), 3),
        (RowCheckFailed("invalid input: x", parameters={"check": "x"}), 3),
        (InputDataError("invalid input: f", condition="INVALID_INPUT.UNREADABLE_FILE"), 3),
        (QualityGateFailed("mean NDCG@10 0.1 is below 0.2"), 4),
        (OutputLocked("output is locked"), 5),
        (SparkGone(errors.SPARK_GONE, condition="SPARK_GONE.DRIVER"), 6),
        (SparkGone(errors.CONNECT_GONE, condition="SPARK_GONE.CONNECT_SERVER"), 6),
        (Stopped(signal.SIGINT, "stopped by SIGINT"), 130),
        (Stopped(signal.SIGTERM, "stopped by SIGTERM"), 143),
    ],
    ids=lambda v: v.condition if isinstance(v, NdcgError) else str(v),
)
def test_each_condition_exits_with_the_code_docs_job_md_gives_it(error, code):
    assert exit_code(error) == code
    assert classify(error) == (code, str(error))


def test_the_table_is_the_one_docs_job_md_shows():
    """Each row of docs/job.md's "Exit codes" names its code's conditions: they are the table's."""
    text = (PACKAGE.parent / "docs" / "job.md").read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    documented = {}
    for code, conditions in re.findall(r"^\| (\d+) \| \(([^)]*)\)", text, re.M):
        for condition in re.findall(r"`([A-Z_.]+?)(?:\.\*)?`", conditions):
            documented[condition] = int(code)
    assert documented == exits.EXIT_CODES


def test_a_condition_is_read_by_its_first_part_and_any_other_is_a_failure():
    assert exit_code(NdcgError("x", condition="INVALID_CONFIG.SOME.DETAIL")) == exits.EXIT_CONFIG
    assert exit_code(NdcgError("x", condition="SOMETHING_NEW")) == exits.EXIT_FAILURE
    assert classify(ValueError("first\nsecond")) == (exits.EXIT_FAILURE, "ValueError: first")


def test_the_jobs_errors_are_the_jobs_and_carry_their_condition():
    assert (interrupts.Stopped, lease.OutputLocked) == (Stopped, OutputLocked)
    stopped = Stopped(signal.SIGTERM, "stopped by SIGTERM")
    assert (stopped.condition, stopped.parameters) == ("STOPPED.SIGTERM", {"signal": "SIGTERM"})
    assert exits.signal_exit(signal.SIGTERM) == 143 and exits.signal_exit(signal.SIGINT) == 130
    assert exits.MEANINGS[exits.EXIT_INPUT] == "invalid input data"
    assert exits.NO_RETRY == {exits.EXIT_CONFIG, exits.EXIT_INPUT, exits.EXIT_QUALITY_GATE}


def test_the_job_only_names_are_the_jobs():
    for name in ("EXIT_INPUT", "OutputLocked", "QualityGateFailed"):
        assert not hasattr(errors, name) and not hasattr(ndcg_spark, name), name
    assert not hasattr(RowCheckFailed("invalid input: x"), "exit_code")
    assert not hasattr(ConfigError("x"), "problems")
    assert "QualityGateFailed" not in ndcg_spark.__all__ and "RowCheckFailed" in ndcg_spark.__all__


def test_no_module_outside_the_job_defines_an_exit_code():
    """The library's modules hold no exit code: no ``EXIT_*`` name, no ``exit_code``, no signal's 128."""
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in targets]
            elif isinstance(node, ast.FunctionDef):
                names = [node.name]
            assert not [n for n in names if n.startswith("EXIT_") or n == "exit_code"], path.name
            assert not (isinstance(node, ast.Constant) and node.value == 128), path.name
