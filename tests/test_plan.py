"""The physical plan keeps its shape: as many exchanges, sorts and generators as docs/design.md states.

Counted in the plan Spark would run (the adaptive plan's initial form, before any stage runs), so
the test is fast and does not depend on the data's size: a change that adds a shuffle, a sort or
an exploded row fails here with the plan in the message.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ndcg_spark import compare, evaluate

DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design.md"
#: A node of the plan's tree: the tree's drawing, then the node's name.
NODE = r"^[\s:|+\-]*{}\b"


def plan_text(df) -> str:
    if not hasattr(df, "_jdf"):
        pytest.skip("the physical plan is read from the JVM (not over Spark Connect)")
    return df._jdf.queryExecution().executedPlan().toString()


def shape(df):
    """(exchanges, sorts, generators) of the plan, and the plan. A shuffle is an ``Exchange``
    node (a broadcast is a ``BroadcastExchange``, not counted)."""
    text = plan_text(df)
    counts = tuple(len(re.findall(NODE.format(name), text, re.M)) for name in ("Exchange", "Sort", "Generate"))
    return counts, text


def stated():
    """The table of docs/design.md's "Exchanges in the plan": {configuration: (exchanges, sorts, generators)}."""
    text = DESIGN.read_text()
    section = text.split("### Exchanges in the plan", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[1].isdigit():
            rows[cells[0].strip("`")] = (int(cells[1]), int(cells[2]), int(cells[3]))
    return rows


@pytest.fixture(scope="module")
def tables(spark):
    recs = spark.createDataFrame(
        [(u, m, f"i{j}", float(j)) for u in range(6) for m in ("a", "b") for j in range(4)],
        "user_id int, model string, item_id string, score double",
    )
    rel = spark.createDataFrame(
        [(u, f"i{j}", float(j % 3)) for u in range(8) for j in range(0, 6, 2)],
        "user_id int, item_id string, relevance double",
    )
    return recs, rel


def configurations(recs, rel):
    one = recs.filter("model = 'a'").drop("model")
    other = recs.filter("model = 'b'").drop("model")
    return {
        "one k": evaluate(one, rel, k=[10]).per_user,
        "six k": evaluate(one, rel, k=[1, 5, 10, 20, 50, 100]).per_user,
        "segments": evaluate(recs, rel, k=[10], group_by=["model"]).per_user,
        "compare": compare(one, other, rel, k=[10]).per_user,
    }


def test_design_states_every_configuration():
    assert set(stated()) == {"one k", "six k", "segments", "compare"}


@pytest.mark.parametrize("name", ["one k", "six k", "segments", "compare"])
def test_the_plan_has_the_exchanges_sorts_and_generators_the_design_states(tables, name):
    (exchanges, sorts, generators), text = shape(configurations(*tables)[name])
    expected = stated()[name]
    assert (exchanges, sorts, generators) == expected, (
        f"{name}: the plan has {exchanges} exchanges, {sorts} sorts, {generators} generators; "
        f"docs/design.md states {expected}:\n{text}"
    )
