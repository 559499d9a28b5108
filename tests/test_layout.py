"""The stages of ``evaluate`` are siblings over the column contract: none imports another; and
the job is a client of the library's public modules, never of a private one."""

from __future__ import annotations

import ast
from pathlib import Path

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
