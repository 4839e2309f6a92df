"""The house's arrows run one way (docs/structure.md): routes → scenes → simulations and drawing
→ the shared floor (model data, parameters, units); drawing knows no simulation, simulations
know no drawing, and no two modules of app/ import each other, however long the circle.

Every module's imports are read with ``ast`` (function-level and ``TYPE_CHECKING`` imports
included: a lazy import is still an arrow) and held against :data:`FORBIDDEN`. Edges that other
work is removing are listed in :data:`KNOWN` and :data:`KNOWN_CYCLES`, each with its owner; an
entry that no longer occurs fails the test, so the lists only shrink.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parent.parent / "app"

FLOOR = ("app.humanize", "app.params", "app.caches", "app.course")
"""The shared floor: units and number phrasing, parameter types, caches, the course's words.
They import nothing of the layers above."""
ABOVE_SIM_AND_DRAW = ("app.scenes", "app.scene", "app.routes", "app.export", "app.jobs",
                      "app.templating", "app.main", "app.cli")
TOP = ("app.routes", "app.main", "app.cli")

FORBIDDEN: dict[str, tuple[str, ...]] = {
    # importer prefix: what it must not import (prefixes of module names)
    "app.sim": ("app.draw", *ABOVE_SIM_AND_DRAW),       # a simulation returns numbers and words
    "app.draw": ("app.sim", *ABOVE_SIM_AND_DRAW),       # drawing knows no simulation
    **{floor: ("app.sim", "app.draw", *ABOVE_SIM_AND_DRAW) for floor in FLOOR},
    "app.scenes": TOP,                                  # a scene is read by the routes
    "app.scene": TOP,
    "app.export": TOP,
    "app.jobs": TOP,
    "app.templating": TOP,
    "app.routes": ("app.main", "app.cli"),
}

HTTP_PACKAGES = ("fastapi", "starlette", "uvicorn", "httpx", "jinja2", "jinja2_fragments",
                 "multipart")
"""What simulations and drawings never import: HTTP and page templates are the routes' and
the scenes' business (DESIGN: simulations never know about HTTP)."""

KNOWN: dict[tuple[str, str], str] = {
    # (importer, imported): owner — why it is still here. Delete the entry with the edge.
}
"""Forbidden arrows that other work is removing (issue 24)."""

KNOWN_CYCLES: dict[frozenset[str], str] = {
    # frozenset of the circle's modules: owner — why it is still here.
}
"""Circles that other work is breaking (issue 24); each must be exactly one strongly connected
component of the import graph while it is listed."""


def module_name(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(APP.rglob("*.py"))}


MODULES = modules()


def _resolve(name: str) -> str:
    """The module of app/ that ``name`` is (or lies in): app.sim.moe.simulate.simulate →
    app.sim.moe.simulate."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports(path: Path) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(modules of app/ imported, other top-level packages imported), each with its line."""
    inside, outside = [], []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # "from app.sim import timeline" imports the module app.sim.timeline
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES
                     else node.module for a in node.names]
        else:
            continue
        for name in names:
            if name == "app" or name.startswith("app."):
                inside.append((_resolve(name), node.lineno))
            else:
                outside.append((name.split(".")[0], node.lineno))
    return inside, outside


GRAPH: dict[str, dict[str, int]] = {}
"""importer → {imported: first line}"""
EXTERNAL: dict[str, dict[str, int]] = {}
for _name, _path in MODULES.items():
    _inside, _outside = imports(_path)
    GRAPH[_name] = {}
    for _target, _line in _inside:
        if _target != _name:
            GRAPH[_name].setdefault(_target, _line)
    EXTERNAL[_name] = {}
    for _package, _line in _outside:
        EXTERNAL[_name].setdefault(_package, _line)


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def rule_of(importer: str) -> tuple[str, tuple[str, ...]] | None:
    """The most specific FORBIDDEN entry that applies to ``importer``."""
    matches = [p for p in FORBIDDEN if under(importer, p)]
    if not matches:
        return None
    prefix = max(matches, key=len)
    return prefix, FORBIDDEN[prefix]


def violations() -> dict[tuple[str, str], str]:
    out = {}
    for importer, targets in GRAPH.items():
        rule = rule_of(importer)
        if rule is None:
            continue
        prefix, banned = rule
        for target, line in targets.items():
            hit = next((b for b in banned if under(target, b)), None)
            if hit:
                out[(importer, target)] = (f"{MODULES[importer].relative_to(APP.parent)}:{line} "
                                           f"imports {target}: {prefix} must not import {hit}")
    return out


def cycles() -> list[frozenset[str]]:
    """The strongly connected components of the import graph with more than one module
    (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for root in GRAPH:
        if root in index:
            continue
        work = [(root, iter(GRAPH[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(GRAPH.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def a_circle(component: frozenset[str]) -> list[str]:
    """One circle through ``component``'s modules, for the message: a → b → … → a."""
    start = min(component)
    path, seen = [start], {start}
    while True:
        nxt = sorted(t for t in GRAPH[path[-1]] if t in component)
        back = start in nxt
        if back and len(path) > 1 or not nxt:
            return path + [start]
        step = next((t for t in nxt if t not in seen), None)
        if step is None:
            return path + [start]
        path.append(step)
        seen.add(step)


def test_every_module_is_read():
    assert len(MODULES) > 150
    assert {"app.sim.timeline", "app.draw.lanes", "app.humanize", "app.routes.scenes"} <= set(GRAPH)


@pytest.mark.parametrize("prefix", sorted(FORBIDDEN))
def test_arrows_run_one_way(prefix):
    """Guarantee: no module under ``prefix`` imports what FORBIDDEN says it must not, other
    than the KNOWN edges being removed."""
    bad = [why for edge, why in violations().items()
           if under(edge[0], prefix) and rule_of(edge[0])[0] == prefix and edge not in KNOWN]
    assert not bad, "\n".join(bad)


def test_simulations_and_drawings_know_no_http():
    bad = [f"{MODULES[m].relative_to(APP.parent)}:{line} imports {package}"
           for m, packages in EXTERNAL.items()
           if under(m, "app.sim") or under(m, "app.draw")
           for package, line in packages.items() if package in HTTP_PACKAGES]
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    """Guarantee: no module of app/ reaches itself through imports (two modules or more),
    except the KNOWN_CYCLES being broken."""
    bad = [" → ".join(a_circle(c)) for c in cycles() if c not in KNOWN_CYCLES]
    assert not bad, "import circles:\n" + "\n".join(bad)


def test_known_edges_still_occur():
    """The lists only shrink: an edge or circle that is gone must leave KNOWN with it."""
    gone = [f"{a} → {b} ({owner}): no longer imported (or no longer forbidden); delete it "
            f"from KNOWN" for (a, b), owner in KNOWN.items() if (a, b) not in violations()]
    found = set(cycles())
    gone += [f"{sorted(c)} ({owner}): no longer a circle; delete it from KNOWN_CYCLES"
             for c, owner in KNOWN_CYCLES.items() if c not in found]
    assert not gone, "\n".join(gone)


def test_the_checker_finds_what_it_should():
    """The rules and the circle finder, on a made-up graph: an upward arrow, a drawing that
    imports a simulation, and a three-module circle are found; a downward arrow is not."""
    saved = dict(GRAPH)
    try:
        GRAPH.clear()
        GRAPH.update({"app.sim.a": {"app.draw.b": 1}, "app.draw.b": {"app.sim.c": 2},
                      "app.sim.c": {"app.sim.d": 3}, "app.sim.d": {"app.sim.e": 4},
                      "app.sim.e": {"app.sim.c": 5}, "app.scenes.x": {"app.sim.a": 6}})
        for name in GRAPH:
            MODULES.setdefault(name, APP / "x.py")
        found = violations()
        assert set(found) == {("app.sim.a", "app.draw.b"), ("app.draw.b", "app.sim.c")}
        assert cycles() == [frozenset({"app.sim.c", "app.sim.d", "app.sim.e"})]
        assert a_circle(cycles()[0]) == ["app.sim.c", "app.sim.d", "app.sim.e", "app.sim.c"]
    finally:
        GRAPH.clear()
        GRAPH.update(saved)
        for name in ("app.sim.a", "app.draw.b", "app.sim.c", "app.sim.d", "app.sim.e",
                     "app.scenes.x"):
            if MODULES.get(name) == APP / "x.py":
                del MODULES[name]
