"""The hidden fields an approval form posts beside its decisions: the hash of the
arguments each request showed (a test posting by hand adds them like the page)."""

from __future__ import annotations

from typing import Any

from sagents_django.approvals.records import arguments_hash
from sagents_django.models import AgentState


def hashed(conversation: Any, post: dict[str, Any]) -> dict[str, Any]:
    """``post`` with ``hash-<i>`` of every stored action request."""
    state = AgentState.objects.get(conversation=conversation)
    interrupt = state.state_data["state"]["interrupt_data"]
    requests = interrupt["action_requests"]
    return {
        **{f"hash-{i}": arguments_hash(r["arguments"]) for i, r in enumerate(requests)},
        **post,
    }
