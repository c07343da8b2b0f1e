"""The agent inspector (staff only): state, middleware, runs, live debug events.

Staff see only conversations their own scope may see: being staff opens the
inspector, not other tenants' data (the admin is the place for that).
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from sagents_django.admin.presentation import pretty_json, pretty_state
from sagents_django.models import AgentRun
from sagents_django.runtime import agent_server
from sagents_django.runtime.agents import build_agent
from sagents_django.security import csp

from .common import owned


@csp
@staff_member_required
@require_safe
def inspector(request: HttpRequest, conversation_id: str) -> HttpResponse:
    scope, found = owned(request, conversation_id)
    envelope = agent_server.export_state(scope, found.pk)
    middleware: list[dict[str, Any]] = []
    problem = ""
    try:
        agent = build_agent(found.agent_id, scope, None)
    except Exception as exc:  # a broken factory still leaves the state readable
        problem = f"The factory failed: {type(exc).__name__}: {exc}"
    else:
        for entry in agent.middleware:
            try:
                summary = entry.middleware.debug_summary()
            except Exception as exc:  # one bad summary must not hide the others
                summary = f"debug_summary failed: {exc}"
            middleware.append(
                {
                    "id": entry.id,
                    "cls": f"{entry.cls.__module__}.{entry.cls.__qualname__}",
                    "summary": pretty_json(summary) if summary is not None else "",
                }
            )
    runs = AgentRun.objects.filter(conversation_id=found.pk).order_by("-created_at")
    return render(
        request,
        "sagents_django/inspector.html",
        {
            "conversation": found,
            "status": agent_server.get_status(scope, found.pk),
            "state": pretty_state(envelope) if envelope is not None else "",
            "middleware": middleware,
            "problem": problem,
            "runs": list(runs[:50]),
        },
    )
