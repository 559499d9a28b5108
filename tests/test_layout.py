"""The stages of ``evaluate`` are siblings over the column contract: none imports another; and
the job is a client of the library's public modules, never of a private one; and the tests that
reach the job are marked so, out of the library's fast loop."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Optional

import pytest

from ndcg_spark import _columns

PACKAGE = Path(_columns.__file__).parent
STAGES = ("_inputs", "_ranking", "_judged", "_scoring", "_summary")


def _imported_modules(source: str) -> set:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.rsplit(".", 1)[-1])
            names.update(alias.name for alias in node.names if node.module == "ndcg_spark")
        elif isinstance(node, ast.Import):
            names.update(alias.name.rsplit(".", 1)[-1] for alias in node.names)
    return names


@pytest.mark.parametrize("stage", STAGES)
def test_a_stage_imports_no_other_stage(stage):
    imported = _imported_modules((PACKAGE / f"{stage}.py").read_text())
    assert imported & set(STAGES) == set(), f"{stage} imports {sorted(imported & set(STAGES))}"


def test_every_internal_column_passed_between_stages_is_declared_once():
    names = [c.name for c in _columns.CONTRACT]
    assert len(names) == len(set(names))
    declared = {v for k, v in vars(_columns).items() if k.isupper() and isinstance(v, str)}
    assert declared == set(names)


def _private_imports(source: str) -> list:
    """The private ``ndcg_spark`` modules a source imports (``ndcg_spark._x``, ``from ndcg_spark
    import _x``, or relative from the package), as dotted names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            # A relative import inside ndcg_spark/job/ (level 2 is the package itself).
            base = node.module or ""
            if node.level == 1:
                base = "ndcg_spark.job" + (f".{base}" if base else "")
            elif node.level >= 2:
                base = "ndcg_spark" + (f".{base}" if base else "")
            # The module itself when private, else each private module imported from it.
            modules = [base] if _is_private(base) else [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [m for m in modules if _is_private(m)]
    return found


def _is_private(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "ndcg_spark" and any(p.startswith("_") and not p.startswith("__") for p in parts[1:])


@pytest.mark.parametrize("path", sorted((PACKAGE / "job").glob("*.py")), ids=lambda p: p.name)
def test_the_job_imports_no_private_module_of_the_library(path):
    imported = _private_imports(path.read_text())
    assert imported == [], f"{path.name} imports {imported}: add what the job needs to the public API"


def test_the_private_import_check_sees_every_spelling():
    spellings = [
        "from ndcg_spark._report import render",
        "from ndcg_spark import _inputs",
        "import ndcg_spark._compat",
        "import ndcg_spark._compat as compat",
        "from .._stats import CORRECTIONS",
        "from .. import _metrics",
        "def f():\n    from ndcg_spark._counts import counted",
    ]
    for source in spellings:
        assert _private_imports(source), source
    public = "from ndcg_spark import __version__, evaluate\nfrom ndcg_spark.job import storage\nfrom . import gates"
    assert _private_imports(public) == []


# ----------------------------------------------------------------------------- the library's loop
# The library's fast loop (CONTRIBUTING.md) leaves out the job's tests by their marker: a test
# that reaches the job (through a name from ndcg_spark.job, a fixture or a helper of the tests that
# does) and carries none of the markers that loop leaves out would run there unmarked.

TESTS = Path(__file__).parent
LEFT_OUT = {"job", "cluster", "process", "bench", "peers", "browser"}


def _job_names(tree: ast.Module) -> set:
    """Names bound at module level to something imported from ``ndcg_spark.job``."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ndcg_spark.job"):
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.asname or alias.name for alias in node.names if alias.name.startswith("ndcg_spark.job"))
    return names


def _functions(tree: ast.Module) -> dict:
    return {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _reaching(functions: dict, job: set) -> set:
    """The functions that reach the job: they use a job name, import from the job, call such a
    function or (a fixture or a test) request one as an argument; to a fixed point."""
    reach, changed = set(), True
    while changed:
        changed = False
        for name, fn in functions.items():
            if name in reach:
                continue
            used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {a.arg for a in fn.args.args}
            imports = any(
                isinstance(n, ast.ImportFrom) and (n.module or "").startswith("ndcg_spark.job") for n in ast.walk(fn)
            )
            if imports or used & (job | reach):
                reach.add(name)
                changed = True
    return reach


def _markers(decorators) -> set:
    """The marker names in ``pytest.mark.X``, ``pytest.mark.X(...)`` and lists of them."""
    found = set()
    for node in decorators:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute) and sub.value.attr == "mark":
                found.add(sub.attr)
    return found


def _shared() -> tuple:
    """The fixtures of conftest.py and the helpers of the tests' own modules that reach the job,
    and those helpers that are decorators giving a marker (``@browser``)."""
    reach, aliases = set(), {}
    for path in [TESTS / "conftest.py", *sorted(p for p in TESTS.glob("*.py") if not p.name.startswith("test_"))]:
        tree = ast.parse(path.read_text())
        reach |= _reaching(_functions(tree), _job_names(tree))
        aliases.update({name: _markers(fn.body) for name, fn in _functions(tree).items() if _markers(fn.body)})
    return reach, aliases


def _unmarked_job_tests(source: str, shared: set, aliases: Optional[dict] = None) -> list:
    tree = ast.parse(source)
    # Markers given a name of their own: ``pytestmark``, ``slow = pytest.mark.process``, or a
    # helper's decorator (``aliases``).
    aliases = dict(aliases or {})
    for node in tree.body:
        if isinstance(node, ast.Assign) and _markers([node.value]):
            aliases.update({t.id: _markers([node.value]) for t in node.targets if isinstance(t, ast.Name)})
    module_marks = aliases.get("pytestmark", set())
    functions = _functions(tree)
    reach = _reaching(functions, _job_names(tree) | shared)

    def marks(fn) -> set:
        named = [aliases.get(d.id, set()) for d in fn.decorator_list if isinstance(d, ast.Name)]
        return module_marks | _markers(fn.decorator_list) | set().union(*named)

    return [
        name
        for name, fn in functions.items()
        if name.startswith("test_") and name in reach and not marks(fn) & LEFT_OUT
    ]


@pytest.mark.parametrize("path", sorted(TESTS.glob("test_*.py")), ids=lambda p: p.name)
def test_a_test_that_reaches_the_job_is_left_out_of_the_librarys_loop(path):
    assert _unmarked_job_tests(path.read_text(), *_shared()) == []


def test_the_job_marker_check_sees_a_direct_use_a_helper_a_fixture_and_a_local_import():
    source = """
import pytest
from ndcg_spark.job import run

def _helper(): return run([])

@pytest.fixture
def ran(): return _helper()

def test_direct(): run([])
def test_helper(): _helper()
def test_fixture(ran): pass
def test_local():
    from ndcg_spark.job.console import format_summary
def test_shared(published): pass
def test_library(spark): pass
@pytest.mark.job
def test_marked(): run([])
"""
    found = _unmarked_job_tests(source, {"published"})
    assert found == ["test_direct", "test_helper", "test_fixture", "test_local", "test_shared"]
    assert _unmarked_job_tests("import pytest\npytestmark = [pytest.mark.cluster]\n" + source, {"published"}) == []
