"""The runtime's imports flow one way: no module of it imports, even inside a
function, a module that imports it back, and none imports the Celery tasks (they
sit above the runtime and call down into it). Read from the source."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "sagents_django"
RUNTIME = "sagents_django.runtime"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        typing_only = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = (
                    ".".join([*base, *([node.module] if node.module else [])])
                    if node.level
                    else node.module or ""
                )
                found = [target, *(f"{target}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {
                t
                for t in found
                if t in modules and t != name and not name.startswith(f"{t}.")
            }
    return graph


def reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        for target in graph[todo.pop()]:
            if target == goal:
                return True
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return False


def test_no_runtime_module_imports_one_that_imports_it_back() -> None:
    graph = imports()
    runtime = [m for m in graph if m.startswith(f"{RUNTIME}.")]
    # The scan sees the imports (or it would pass by finding nothing).
    assert f"{RUNTIME}.turn" in graph[f"{RUNTIME}.opening"]

    circles = [m for m in runtime if reaches(graph, m, m)]

    assert circles == []


def test_the_runtime_never_imports_the_celery_tasks() -> None:
    graph = imports()
    assert "sagents_django.runtime.runner" in graph["sagents_django.tasks"]

    importers = [
        m for m in graph if m.startswith(RUNTIME) and "sagents_django.tasks" in graph[m]
    ]

    assert importers == []
