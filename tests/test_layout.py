"""The stages of ``evaluate`` are siblings over the column contract: none imports another; and
the job is a client of the library's public modules, never of a private one; the job's rooms
(config, result, gates, outputs, commands) depend on each other one way, with no cycle anywhere
in the package; and the tests that reach the job are marked so, out of the library's fast loop.

The import graph is a command anyone can run: ``python tests/test_layout.py`` prints the
modules, import arrows, floors and cycles of ``ndcg_spark/job`` and of the whole package."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Optional

import pytest

import ndcg_spark
from ndcg_spark._stages import column_contract as _columns

PACKAGE = Path(ndcg_spark.__file__).parent


def test_every_internal_column_passed_between_stages_is_declared_once():
    names = [c.name for c in _columns.CONTRACT]
    assert len(names) == len(set(names))
    declared = {v for k, v in vars(_columns).items() if k.isupper() and isinstance(v, str)}
    assert declared == set(names)


def _private_imports(source: str, package: str = "ndcg_spark.job") -> list:
    """The private ``ndcg_spark`` modules a source imports (``ndcg_spark._x``, ``from ndcg_spark
    import _x``, or relative from ``package``, the one the source is in), as dotted names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            # The module itself when private, else each private module imported from it.
            modules = [base] if _is_private(base) else [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [m for m in modules if _is_private(m)]
    return found


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The module an ``ImportFrom`` names, a relative one resolved from ``package`` (level 1 is
    ``package`` itself, level 2 its parent...)."""
    base = node.module or ""
    if not node.level:
        return base
    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join([*anchor, *([base] if base else [])])


def _is_private(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "ndcg_spark" and any(p.startswith("_") and not p.startswith("__") for p in parts[1:])


JOB_FILES = sorted((PACKAGE / "job").rglob("*.py"))


@pytest.mark.parametrize("path", JOB_FILES, ids=lambda p: str(p.relative_to(PACKAGE / "job")))
def test_the_job_imports_no_private_module_of_the_library(path):
    imported = _private_imports(path.read_text(), _package_of(path))
    assert imported == [], f"{path.name} imports {imported}: add what the job needs to the public API"


def _package_of(path: Path) -> str:
    """The dotted package a source file of ``ndcg_spark`` is in."""
    return ".".join(["ndcg_spark", *path.parent.relative_to(PACKAGE).parts])


def test_the_private_import_check_sees_every_spelling():
    spellings = [
        "from ndcg_spark._report import render",
        "from ndcg_spark import _inputs",
        "import ndcg_spark._spark.compat",
        "import ndcg_spark._spark.compat as compat",
        "from .._stats import CORRECTIONS",
        "from .. import _metrics",
        "def f():\n    from ndcg_spark._spark.counts import counted",
    ]
    for source in spellings:
        assert _private_imports(source), source
    public = "from ndcg_spark import __version__, evaluate\nfrom ndcg_spark.job import console\nfrom . import gates"
    assert _private_imports(public) == []
    # Relative imports from a room of the job resolve from its own package.
    assert _private_imports("from ... import _compat", "ndcg_spark.job.outputs") == ["ndcg_spark._compat"]
    assert _private_imports("from .. import console", "ndcg_spark.job.outputs") == []


# ----------------------------------------------------------------------------- the library's rooms
#: The public modules at the package's root that hold the library's vocabulary (the options, the
#: presets, the errors, the Spark check): every room may import them.
BASE = {"options", "conventions", "errors", "spark_support"}

#: The library's rooms (its private packages, ``ndcg_spark.<room>``) and the only rooms each may
#: import besides itself and :data:`BASE`. The public modules at the root are the front door:
#: they may import any room, and no room imports them.
LIBRARY_ROOMS_ALLOWED = {
    "_spark": set(),
    "_metrics": set(),
    "_charts": set(),
    "_stages": {"_metrics", "_spark"},
    "_beyond": {"_stages", "_metrics", "_spark"},
    "_results": {"_beyond", "_stages", "_charts", "_metrics", "_spark"},
    "_comparison": {"_results", "_stages", "_metrics", "_spark"},
}


def room_of(module: str) -> str:
    """The room of a module of the package: its sub-package, or the module itself at the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def library_crossings(graph: dict, allowed: dict = LIBRARY_ROOMS_ALLOWED) -> set:
    """The (module, imported module) pairs of ``graph`` where a room imports a room it may not."""
    return {
        (module, target)
        for module, targets in graph.items()
        if room_of(module) in allowed
        for target in targets
        if room_of(target) not in {room_of(module), *allowed[room_of(module)], *BASE}
    }


def test_each_room_of_the_library_imports_only_the_rooms_it_may():
    assert library_crossings(import_graph(modules_of())) == set()


def test_the_room_rule_sees_a_room_reaching_up_or_across_or_to_the_front_door():
    graph = {
        "ndcg_spark._stages.scoring": {
            "ndcg_spark._beyond.means",
            "ndcg_spark._stages.column_contract",
            "ndcg_spark.options",
        },
        "ndcg_spark._beyond.means": {"ndcg_spark._stages.summary", "ndcg_spark.evaluation"},
        "ndcg_spark._spark.sql": {"ndcg_spark._metrics.registry"},
        "ndcg_spark.evaluation": {"ndcg_spark._beyond.stage"},
    }
    assert library_crossings(graph) == {
        ("ndcg_spark._stages.scoring", "ndcg_spark._beyond.means"),
        ("ndcg_spark._beyond.means", "ndcg_spark.evaluation"),
        ("ndcg_spark._spark.sql", "ndcg_spark._metrics.registry"),
    }


def test_no_cycle_among_the_librarys_rooms():
    # Modules without a cycle can still make one room by room (options -> the registry -> options).
    assert cycles(library_rooms(import_graph(modules_of()))) == []


def test_the_room_cycle_check_sees_two_rooms_importing_each_other_through_other_modules():
    graph = {
        "ndcg_spark.options": {"ndcg_spark._metrics.registry"},
        "ndcg_spark._metrics.beyond": {"ndcg_spark.options"},
    }
    assert cycles(library_rooms(graph)) == [["_metrics", "options"]]


#: The stages of the data's way, each a module of ``_stages``, and beyond accuracy beside scoring
#: (one stage, a package of its own). A stage imports no other stage: they meet over the column
#: contract (``_stages/column_contract.py``) and the row rules (``_stages/rules.py``), which are no stage.
NDCG_STAGES = ("inputs", "ranking", "judged", "lists", "scoring", "summary")

#: Where beyond accuracy reads NDCG's stages on purpose, and why: its stage ranks the baseline's
#: lists as the recommendations' own (the input stage's entry point, the ranking), and its tables
#: are read as the input stage reads the recommendations (the array layout as rows, item types).
STAGE_MEETINGS = {
    ("ndcg_spark._beyond.stage", "ndcg_spark._stages.inputs"),
    ("ndcg_spark._beyond.stage", "ndcg_spark._stages.ranking"),
    ("ndcg_spark._beyond.sources", "ndcg_spark._stages.inputs"),
}


def stage_of(module: str) -> Optional[str]:
    """The stage a module belongs to (``beyond`` for every module of ``_beyond``), or None."""
    if module.startswith("ndcg_spark._beyond"):
        return "beyond"
    name = module.rsplit(".", 1)[-1]
    return name if module == f"ndcg_spark._stages.{name}" and name in NDCG_STAGES else None


def stage_crossings(graph: dict, meetings: set = STAGE_MEETINGS) -> set:
    """The (module, imported module) pairs of ``graph`` where one stage imports another."""
    return {
        (module, target)
        for module, targets in graph.items()
        for target in targets
        if stage_of(module)
        and stage_of(target)
        and stage_of(module) != stage_of(target)
        and (module, target) not in meetings
    }


def test_every_column_of_the_contract_is_written_by_a_stage():
    # A writer names its stage first ("judged; scoring per ideal": one writer, then another's case).
    writers = {part.split()[0] for c in _columns.CONTRACT for part in c.writer.split("; ")}
    assert writers <= set(NDCG_STAGES)


def test_a_stage_imports_no_other_stage():
    assert stage_crossings(import_graph(modules_of())) == set()


def test_the_stage_rule_sees_a_stage_importing_another_beyond_accuracy_too():
    graph = {
        "ndcg_spark._stages.scoring": {"ndcg_spark._stages.judged", "ndcg_spark._stages.rules"},
        "ndcg_spark._beyond.means": {"ndcg_spark._stages.summary", "ndcg_spark._beyond.columns"},
        "ndcg_spark._beyond.stage": {"ndcg_spark._stages.ranking", "ndcg_spark._stages.column_contract"},
    }
    assert stage_crossings(graph) == {
        ("ndcg_spark._stages.scoring", "ndcg_spark._stages.judged"),
        ("ndcg_spark._beyond.means", "ndcg_spark._stages.summary"),
    }
    assert stage_crossings(graph, set()) >= {("ndcg_spark._beyond.stage", "ndcg_spark._stages.ranking")}


def private_names_imported(source: str) -> list:
    """The private names (``_x``) a source imports from a module of the package."""
    return [
        f"{node.module or '.'}.{alias.name}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and ((node.module or "").startswith("ndcg_spark") or node.level)
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_private_name_of_another(path):
    imported = [n for n in private_names_imported(path.read_text()) if n.rsplit(".", 1)[-1] not in _ROOMS]
    assert imported == [], f"{path.name} imports {imported}: a name another module uses is public in its own"


#: The rooms are private packages: importing one (``from ndcg_spark import _stages``) is no private name.
_ROOMS = set(LIBRARY_ROOMS_ALLOWED) | {"_beyond"}


def test_the_private_name_check_sees_every_spelling():
    assert private_names_imported("from ndcg_spark._charts.plots import _e, axis") == ["ndcg_spark._charts.plots._e"]
    assert private_names_imported("from .plots import _nice") == ["plots._nice"]
    assert private_names_imported("def f():\n    from ndcg_spark.report import _bins") == ["ndcg_spark.report._bins"]
    assert private_names_imported("from ndcg_spark._stages.summary import summarize\nfrom os import _exit") == []


# ----------------------------------------------------------------------------- the import graph
# Every import of a module of the package, at any depth (inside functions too): an arrow from the
# importing module to the imported one. ``from pkg import name`` is an arrow to ``pkg.name`` when
# that is a module, else to ``pkg``.


def modules_of(root: Path = PACKAGE, package: str = "ndcg_spark") -> dict:
    """{dotted module name: path} of every module under ``root`` (a package is its ``__init__``)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join([package, *parts])] = path
    return found


def import_graph(modules: dict) -> dict:
    """{module: the modules of ``modules`` it imports}."""
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imports = [(alias.name, []) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                imports = [(_absolute(node, package), [alias.name for alias in node.names])]
            else:
                continue
            for base, names in imports:
                submodules = {f"{base}.{n}" for n in names if f"{base}.{n}" in modules}
                targets |= submodules
                if len(submodules) < len(names) or not names:
                    while base and base not in modules:  # the nearest enclosing module of the package
                        base = base.rsplit(".", 1)[0] if "." in base else ""
                    targets |= {base} if base else set()
        graph[name] = targets - {name}
    return graph


def job_graph() -> dict:
    """The import graph of ``ndcg_spark/job`` alone."""
    return import_graph(modules_of(PACKAGE / "job", "ndcg_spark.job"))


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan's), each sorted."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def floors(graph: dict) -> int:
    """The floors of the graph, each cycle one module: 1 + the longest chain of arrows."""
    home = {m: f"cycle {i}" for i, component in enumerate(cycles(graph)) for m in component}
    above = {}
    for v, targets in graph.items():
        above.setdefault(home.get(v, v), set()).update(
            home.get(w, w) for w in targets if home.get(w, w) != home.get(v, v)
        )
    depth: dict = {}

    def floor(n):
        if n not in depth:
            depth[n] = 1 + max((floor(w) for w in above.get(n, ())), default=0)
        return depth[n]

    return max((floor(n) for n in above), default=0)


def measures(graph: dict, name: str) -> str:
    """One line of figures of a graph, and one per cycle."""
    n, arrows = len(graph), sum(len(targets) for targets in graph.values())
    line = f"{name}: {n} modules, {arrows} import arrows among {n * (n - 1) // 2} pairs, {floors(graph)} floors"
    found = cycles(graph)
    return "\n".join([f"{line}, {len(found)} cycle(s)", *(f"  cycle: {' <-> '.join(c)}" for c in found)])


def _in(module: str, *rooms: str) -> bool:
    return any(module == f"ndcg_spark.job.{r}" or module.startswith(f"ndcg_spark.job.{r}.") for r in rooms)


def test_no_import_cycle_anywhere_in_the_package():
    graph = import_graph(modules_of())
    assert cycles(graph) == []


def test_the_graph_sees_an_import_a_lazy_import_a_relative_one_and_a_cycle(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from ..c import x\n")
    (package / "c.py").write_text("import pkg.a\nfrom pkg import sub\n")
    graph = import_graph(modules_of(package, "pkg"))
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.c"}
    assert graph["pkg.c"] == {"pkg.a", "pkg.sub"}
    assert cycles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    assert floors(graph) == 2  # the cycle, then the package pkg.sub it imports


#: The rooms of the job and the only rooms each may import (``ndcg_spark.job.X``; the library is
#: open to all). ``cli`` never imports ``outputs``: the sink is made and kept by the commands.
ROOMS_ALLOWED = {
    "config": {"config"},
    "result": {"config"},
    "gates": {"gates", "config", "result"},
    "outputs": {"outputs", "config", "result", "exits", "interrupts"},
    "commands": {"commands", "config", "result", "gates", "outputs", "exits", "interrupts", "progress", "console"},
    "cli": {"commands", "config", "result", "gates", "exits", "interrupts", "progress", "console"},
}


@pytest.mark.parametrize("room", sorted(ROOMS_ALLOWED))
def test_each_room_of_the_job_imports_only_the_rooms_below_it(room):
    wrong = {
        (module, target)
        for module, targets in job_graph().items()
        if _in(module, room)
        for target in targets
        if not _in(target, *ROOMS_ALLOWED[room])
    }
    assert wrong == set()


def test_the_directory_and_the_catalog_never_import_each_other():
    graph = job_graph()
    for one, other in (("outputs.directory", "outputs.catalog"), ("outputs.catalog", "outputs.directory")):
        crossing = {(m, t) for m, targets in graph.items() if _in(m, one) for t in targets if _in(t, other)}
        assert crossing == set()


def stem(name: str) -> str:
    """A module's name without its inflection: ``checks``, ``checking`` and ``checked`` are ``check``."""
    word = name.lstrip("_")
    for ending in ("s", "ing", "ed", "er"):
        if word.endswith(ending) and len(word) > len(ending) + 2:
            word = word[: -len(ending)]
    return word


def same_names(modules) -> dict:
    """{stem: modules} of the module files whose names are variants of one word. A command of the
    job (``job/commands/compare.py``) is named for the command it runs, as the library's entry
    point for it (``compare.py``) is: the two are one name on purpose, not a clash."""
    names: dict = {}
    for module in modules:
        if module.startswith("ndcg_spark.job.commands."):
            continue
        names.setdefault(stem(module.rsplit(".", 1)[-1]), set()).add(module)
    return {s: sorted(m) for s, m in names.items() if len(m) > 1}


def test_a_modules_name_says_what_it_holds_no_two_are_variants_of_one_word():
    files = [m for m, path in modules_of().items() if path.name != "__init__.py"]
    assert same_names(files) == {}
    assert same_names(["ndcg_spark._stages.inputs", "ndcg_spark.job.input", "ndcg_spark.job.commands.validate"]) == {
        "input": ["ndcg_spark._stages.inputs", "ndcg_spark.job.input"]
    }
    assert stem("checks") == stem("checking") == stem("checked") == "check"
    assert stem("nights") != stem("history")


def test_every_package_of_ndcg_spark_is_built_into_the_wheel():
    import tomllib

    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())
    packages = {m for m, path in modules_of().items() if path.name == "__init__.py"}
    assert set(pyproject["tool"]["setuptools"]["packages"]) == packages


def _design_table(heading: str) -> set:
    """The modules named in the first column of the table that follows ``heading`` in docs/design.md."""
    text = (PACKAGE.parent / "docs" / "design.md").read_text()
    lines = text[text.index(heading) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| module |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1].strip().strip("`"))
    return set(rows)


def _design_tables(start: str, end: str, text: Optional[str] = None) -> set:
    """The modules named in the first column of every ``| module |`` table of docs/design.md (or
    of ``text``) between the headings ``start`` and ``end``."""
    text = (PACKAGE.parent / "docs" / "design.md").read_text() if text is None else text
    section = text[text.index(start) : text.index(end)]
    rows, in_table = set(), False
    for line in section.splitlines():
        if line.startswith("| module |"):
            in_table = True
        elif in_table and line.startswith("|") and not line.startswith("|---"):
            rows.add(line.split("|")[1].strip().strip("`"))
        elif not line.startswith("|"):
            in_table = False
    return rows


def _has_code(path: Path) -> bool:
    """Whether a module holds more than its docstring (a room's ``__init__.py`` holds only that)."""
    body = ast.parse(path.read_text()).body
    return any(not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)) for n in body)


def test_the_design_documents_every_module_of_the_library_and_no_other():
    library = {
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "job" not in p.relative_to(PACKAGE).parts[:1]
    }
    documented = _design_tables("## Code layout", "The job is the package `ndcg_spark/job/`")
    assert documented == {m for m in library if _has_code(PACKAGE / m)}


def test_the_design_table_check_reads_every_table_of_the_section_and_nothing_else():
    text = """## Code layout
| module | holds |
|---|---|
| `options.py` | the options |

prose | with a bar
| module | holds |
|---|---|
| `_stages/inputs.py` | the input stage |
The job is the package `ndcg_spark/job/`
| module | holds |
|---|---|
| `cli.py` | the job's |
"""
    found = _design_tables("## Code layout", "The job is the package", text)
    assert found == {"options.py", "_stages/inputs.py"}


def test_the_design_documents_every_module_of_the_job_and_no_other():
    job = PACKAGE / "job"
    modules = {str(p.relative_to(job)) for p in job.rglob("*.py") if p.read_text().strip()}
    assert _design_table("The job is the package `ndcg_spark/job/`") == modules


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


def library_rooms(graph: dict) -> dict:
    """The library's graph by room (a private package, or a module at the root), the job left out."""
    rooms: dict = {}
    for module, targets in graph.items():
        if room_of(module) == "job":
            continue
        rooms.setdefault(room_of(module) or "__init__", set()).update(
            room_of(t) for t in targets if room_of(t) not in (room_of(module), "job")
        )
    return rooms


if __name__ == "__main__":
    print(measures(job_graph(), "ndcg_spark.job"))
    print(measures(import_graph(modules_of()), "ndcg_spark"))
    print(measures(library_rooms(import_graph(modules_of())), "ndcg_spark's library by room"))
