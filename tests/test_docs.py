"""The examples in the docstrings run as doctests, with the suite's SparkSession as ``spark``."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import ndcg_spark

README = Path(__file__).parent.parent / "README.md"
MODULES = [
    "ndcg_spark.options",
    "ndcg_spark.evaluation",
    "ndcg_spark.validation",
    "ndcg_spark.errors",
    "ndcg_spark.compare",
    "ndcg_spark.paired",
    "ndcg_spark._stages.scoring",
    "ndcg_spark._stages.inputs",
    "ndcg_spark._charts.plots",
    "ndcg_spark._spark.sql",
    "ndcg_spark.job.console",
    "ndcg_spark.job.config.parsing",
    "ndcg_spark.job.config.targets",
    "ndcg_spark.job.config.settings",
    "ndcg_spark.job.config.spellings",
    "ndcg_spark.reading",
    "ndcg_spark.conventions",
    "ndcg_spark.ml",
    "ndcg_spark._comparison.statistics",
    "ndcg_spark.job.config.gate_specs",
    "ndcg_spark.job.gates.holding",
    "ndcg_spark.job.gates.wording",
    "ndcg_spark.job.result",
    "ndcg_spark.job.commands.tracking",
    "ndcg_spark.job.exits",
    "ndcg_spark._spark.compat",
    "ndcg_spark.report",
    "ndcg_spark.spark_support",
]


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.job) if n.startswith("ndcg_spark.job.") else n for n in MODULES]
)
def test_docstring_examples_run(spark, name):
    module = importlib.import_module(name)
    globs = {**vars(module), **{n: getattr(ndcg_spark, n) for n in ndcg_spark.__all__}, "spark": spark}
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, name, globs=globs) if t.examples]
    assert tests, f"{name} has no examples"
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_every_public_name_has_an_example_or_is_a_type():
    """numpydoc sections on each public function and class; the functions show an example."""
    for name in ndcg_spark.__all__:
        obj = getattr(ndcg_spark, name)
        doc = obj.__doc__ or ""
        assert doc.strip(), name
        if callable(obj) and not isinstance(obj, type):
            for section in ("Parameters", "Returns", "Raises", "Examples"):
                assert section in doc, f"{name} has no {section} section"


def test_the_readme_library_example_prints_what_the_readme_shows(spark, capsys):
    """The README's Python block, run as a user pastes it, prints the tables shown below it."""
    section = README.read_text().split("## Library", 1)[1]
    code, after = section.split("```python\n", 1)[1].split("```", 1)
    shown = after.split("```\n", 1)[1].split("```", 1)[0]
    # getOrCreate() returns the suite's running session, as it would a notebook's.
    exec(compile(code, "README.md", "exec"), {})
    assert capsys.readouterr().out.strip() == shown.strip()
