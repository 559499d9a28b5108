"""The stages of ``evaluate`` are siblings over the column contract: none imports another."""

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
