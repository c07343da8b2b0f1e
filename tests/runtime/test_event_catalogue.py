"""Every event the runtime and the core's middleware publish is in the catalogue.

The names are read from the source: the first string argument of every call to
``publish`` / ``emit`` / ``_send`` / ``after_commit`` (a variable name, as in a
forwarding call, is not a new event), and the ``(name, data)`` pairs a function
named ``events`` builds (a run's ending, ``runtime.ending.Ended.events``)."""

from __future__ import annotations

import ast
from pathlib import Path

from sagents_django.core.events import DISPLAY_MESSAGE, EVENTS
from sagents_django.runtime.publisher import display_message_json

PACKAGE = Path(__file__).resolve().parents[2] / "sagents_django"
CALLS = {"publish", "emit", "_send", "after_commit"}


def published_names() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef) and function.name == "events":
                for pair in ast.walk(function):
                    if (
                        isinstance(pair, ast.Tuple)
                        and len(pair.elts) == 2
                        and isinstance(pair.elts[0], ast.Constant)
                        and isinstance(pair.elts[0].value, str)
                    ):
                        where = f"{path.name}:{pair.lineno}"
                        found.setdefault(pair.elts[0].value, where)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else None
            name = func.id if isinstance(func, ast.Name) else name
            if name not in CALLS:
                continue
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.setdefault(arg.value, f"{path.name}:{node.lineno}")
                    break
    return found


def test_every_event_name_published_in_the_source_is_in_the_catalogue() -> None:
    names = published_names()

    # The scan sees what it must (or it would pass by finding nothing).
    assert {"run_started", "run_finished", "message_queued", "error"} <= set(names)
    assert {"agent_state_update", "todo_snapshot", "agent_shutdown"} <= set(names)
    missing = {n: where for n, where in names.items() if n not in EVENTS}
    assert missing == {}


def test_the_display_message_shape_names_every_key_of_a_row() -> None:
    class Row:
        pk = 1
        conversation_id = "c"
        message_type = "user"
        content_type = "text"
        content: dict[str, str] = {}
        sequence = 0
        status = "completed"
        metadata: dict[str, str] = {}
        inserted_at = None

    for key in display_message_json(Row()):
        assert f'"{key}"' in DISPLAY_MESSAGE, key
