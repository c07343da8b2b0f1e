"""The chat pages: server time to render a long conversation, and socket traffic
per streamed reply.

1. **Page.** A conversation of 500 display rows (a person's message, a markdown
   reply with a code block, a tool call and its result, in turn) is rendered by the
   real view through Django's test client: the page as served (the latest
   ``PAGE_SIZE`` rows; older ones load on scroll), and the whole transcript at once
   (the chat box with all 500 rows through the same templates); and the page of a
   conversation whose shown branch has 500 rows, with 3 branches made by the real
   verbs (issue 19: at most 60 ms median). Median, p90 and max of ``--runs``
   renders, after one warm-up (template and markdown parser caches).
2. **Socket.** A 100-token reply (100 deltas of ~4 characters) is published by the
   runtime's ``Publisher`` (batching over ``SAGENTS["DELTA_WINDOW_MS"]``) through the
   in-memory channel layer to the chat page's consumer (``ws/sagents/html/<id>/``),
   at several token rates; the frames and bytes that reach the browser's socket are
   counted (the deltas' frames, and all frames of the reply including the final row).

Run from the repository root::

    .venv/bin/python bench/ui.py            # ~30 s
    .venv/bin/python bench/ui.py --quick

A benchmark, not a test: it prints figures and asserts no thresholds. It uses a
temporary SQLite database. Targets (issue 11): the page in at most 150 ms; a
100-token reply in far fewer than 100 frames.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
_folder = tempfile.mkdtemp(prefix="bench-ui-")
os.environ["DATABASE_URL"] = f"sqlite:///{_folder}/db.sqlite3"

REPLY = """Here is the plan for **Saturday**:

1. Pack the *basket* and the blanket.
2. Check the [forecast](https://example.com/weather).

```python
def pack(items):
    return sorted(set(items))
```
"""


def setup() -> tuple[Any, Any]:
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.ALLOWED_HOSTS = ["*"]
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }
    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model

    from sagents_django import services
    from sagents_django.scope import Scope

    user = get_user_model().objects.create_user("bench")
    scope = Scope.for_user(user)
    conversation = services.create_conversation(scope, title="Bench")
    rows: list[dict[str, Any]] = []
    for n in range(125):
        call = f"call-{n}"
        rows += [
            {"message_type": "user", "content_type": "text",
             "content": {"text": f"Question {n}: what next?"}},
            {"message_type": "assistant", "content_type": "text",
             "content": {"text": REPLY}},
            {"message_type": "assistant", "content_type": "tool_call",
             "content": {"call_id": call, "name": "write_file",
                         "arguments": {"file_path": f"/n/{n}.md", "content": REPLY}},
             "status": "completed"},
            {"message_type": "tool", "content_type": "tool_result",
             "content": {"tool_call_id": call, "name": "write_file",
                         "content": f"Wrote /n/{n}.md"}},
        ]  # fmt: skip
    services.append_display_messages(scope, conversation.pk, rows)
    return user, conversation


def turn_rows(n: int, question: str | None = None) -> list[dict[str, Any]]:
    """The four rows of turn ``n`` (the question left out when it is given:
    a branch verb wrote it)."""
    call = f"call-{n}"
    rows = [
        {"message_type": "assistant", "content_type": "text",
         "content": {"text": REPLY}},
        {"message_type": "assistant", "content_type": "tool_call",
         "content": {"call_id": call, "name": "write_file",
                     "arguments": {"file_path": f"/n/{n}.md", "content": REPLY}},
         "status": "completed"},
        {"message_type": "tool", "content_type": "tool_result",
         "content": {"tool_call_id": call, "name": "write_file",
                     "content": f"Wrote /n/{n}.md"}},
    ]  # fmt: skip
    if question is None:
        text = {"text": f"Question {n}: what next?"}
        rows.insert(
            0, {"message_type": "user", "content_type": "text", "content": text}
        )
    return rows


def branched(user: Any) -> Any:
    """A conversation whose shown branch has 500 rows, with 3 branches made by
    the real verbs (edit, regenerate, edit) at turns 60, 110 and 120 of 125; the
    runs they start are ended here (no model runs in the bench)."""
    from sagents_django import services
    from sagents_django.core import Message, State
    from sagents_django.core.serialization import serialize_server_state
    from sagents_django.models import AgentRun
    from sagents_django.runtime import admission, agent_server
    from sagents_django.scope import Scope

    class NoExecutor:
        def submit(self, run_id: str) -> None:
            pass

    admission.get_executor = NoExecutor  # type: ignore[assignment]
    scope = Scope.for_user(user)
    conversation = services.create_conversation(scope, title="Branched")
    pk = conversation.pk

    def add(turns: range, *, answered: str | None = None) -> None:
        AgentRun.objects.filter(conversation_id=pk).update(status="completed")
        data = services.load_agent_state(scope, pk)
        state = State.from_serialized(None, data) if data else State()
        rows: list[dict[str, Any]] = []
        for n in turns:
            question = answered if n == turns.start else None
            rows += turn_rows(n, question)
            if question != "regenerated":
                state = state.add_message(Message.user(question or f"Question {n}"))
            state = state.add_message(Message.assistant(REPLY))
        services.append_display_messages(scope, pk, rows)
        services.save_agent_state(scope, pk, serialize_server_state(state))

    def question_of(n: int) -> int:
        rows = services.load_display_messages(scope, pk)
        return next(
            r.pk for r in rows if r.content.get("text") == f"Question {n}: what next?"
        )

    add(range(125))
    agent_server.edit_and_resend(scope, pk, question_of(60), "Edited 60")
    add(range(60, 125), answered="Edited 60")
    reply = [r.pk for r in services.load_display_messages(scope, pk)][-4 * 15 + 1]
    agent_server.regenerate(scope, pk, reply)
    add(range(110, 125), answered="regenerated")
    agent_server.edit_and_resend(scope, pk, question_of(120), "Edited 120")
    add(range(120, 125), answered="Edited 120")
    AgentRun.objects.filter(conversation_id=pk).update(status="completed")
    shown = len(services.load_display_messages(scope, pk))
    every = len(services.load_display_messages(scope, pk, all_branches=True))
    print(f"\nBranched conversation: {shown} rows shown, {every} in all branches")
    return conversation


def timed(call: Any, runs: int) -> list[float]:
    call()  # warm-up: template loading, markdown parser, Pygments lexers
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def page_figures(user: Any, conversation: Any, runs: int, branched: Any = None) -> None:
    from django.template.loader import render_to_string
    from django.test import Client, RequestFactory

    from sagents_django.scope import Scope
    from sagents_django.ui.context import PAGE_SIZE, Chat

    client = Client()
    client.force_login(user)
    url = f"/c/{conversation.pk}/"

    def page() -> None:
        response = client.get(url)
        assert response.status_code == 200, response.status_code

    request = RequestFactory().get(url)
    request.user = user

    def whole() -> None:
        chat = Chat(Scope.for_user(user), conversation, page_size=500)
        render_to_string(
            "sagents_django/partials/chat_box.html", {"chat": chat}, request=request
        )

    print(f"\nPage render, 500 rows in the conversation ({runs} runs, ms)")
    print("| what | median | p90 | max |")
    print("| --- | ---: | ---: | ---: |")
    calls = [
        (f"the page as served (latest {PAGE_SIZE} rows)", page),
        ("all 500 rows at once (chat box)", whole),
    ]
    if branched is not None:
        branched_url = f"/c/{branched.pk}/"

        def branched_page() -> None:
            response = client.get(branched_url)
            assert response.status_code == 200, response.status_code
            assert b"sg-branch-count" in response.content

        calls.append(
            (
                f"the page of a 500-row branch, 3 branches (latest {PAGE_SIZE})",
                branched_page,
            )
        )
    medians = []
    for name, call in calls:
        values = sorted(timed(call, runs))
        p90 = values[int(len(values) * 0.9) - 1]
        medians.append(statistics.median(values))
        print(f"| {name} | {medians[-1]:.1f} | {p90:.1f} | {values[-1]:.1f} |")
    if branched is not None:
        # Taken in turns, so a busy machine slows both alike.
        plain, with_branches = [], []
        for _ in range(runs):
            plain += timed(page, 1)
            with_branches += timed(branched_page, 1)
        ratio = statistics.median(with_branches) / statistics.median(plain)
        print(f"\nThe branched page / the page as served, taken in turns: {ratio:.2f}")


async def stream_figures(user: Any, conversation: Any, rates: list[float]) -> None:
    from asgiref.sync import sync_to_async
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator

    from sagents_django import services
    from sagents_django.routing import websocket_urlpatterns
    from sagents_django.runtime.publisher import Publisher, display_message_json
    from sagents_django.scope import Scope

    tokens = [f"w{n:02d} " for n in range(100)]  # ~4 characters, about a token
    print("\nOne 100-token reply over the chat page's socket (DELTA_WINDOW_MS 20)")
    print("| tokens/s | delta frames | delta bytes | all frames | all bytes |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    scope = Scope.for_user(user)
    for rate in rates:
        socket = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns), f"/ws/sagents/html/{conversation.pk}/"
        )
        socket.scope["user"] = user
        connected, _ = await socket.connect()
        assert connected
        publisher = Publisher(conversation.pk, window=0.02)
        for token in tokens:
            publisher.add_deltas([{"content": token}])
            await asyncio.sleep(1 / rate)
        await publisher.flush()
        row = await sync_to_async(services.append_text_message)(
            scope, conversation.pk, "assistant", "".join(tokens)
        )
        await publisher.publish(
            "display_message_saved", {"display_message": display_message_json(row)}
        )
        await publisher.aclose()
        frames: list[str] = []
        # receive_nothing peeks without cancelling the consumer (a timed-out
        # receive_from would).
        while not await socket.receive_nothing(0.5):
            frames.append(await socket.receive_from(1))
        await socket.disconnect()
        deltas = [f for f in frames if "sg-stream-text" in f and "sg-msg-" not in f]
        print(
            f"| {rate:.0f} | {len(deltas)} | {sum(len(f.encode()) for f in deltas)} "
            f"| {len(frames)} | {sum(len(f.encode()) for f in frames)} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = 5 if args.quick else args.runs
    user, conversation = setup()
    page_figures(user, conversation, runs, branched(user))
    rates = [100.0] if args.quick else [50.0, 100.0, 200.0, 1000.0]
    asyncio.run(stream_figures(user, conversation, rates))


if __name__ == "__main__":
    main()
