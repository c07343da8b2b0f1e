"""Starting what a ``RunAgentInput`` asks: the new message's turn, or the
decisions that resume a paused one (for the HTTP endpoint and the socket alike)."""

from __future__ import annotations

from sagents_django import services
from sagents_django.approvals import deciding
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.runtime import agent_server
from sagents_django.scope import Scope
from sagents_django.sharing.access import scope_for

from . import interrupts, snapshot
from .inputs import RunInput
from .stream import Join
from .translate import Translator

VIA = "api"
"""How an approval decided here is recorded in the approvals' audit trail (a
programmatic client; the trail's channels are a closed set)."""


def start(scope: Scope, run_input: RunInput) -> Join:
    """Take what the input asks (a message, or decisions); the stream to follow."""
    # A share lends its holder a scope (sharing.access): a run needs write access.
    scope = scope_for(scope, run_input.thread_id, access="write")
    conversation = services.get_conversation(scope, run_input.thread_id)
    if conversation is None:
        raise NotFound("thread")
    translator = Translator(thread_id=run_input.thread_id, run_id=run_input.run_id)
    if run_input.resume:
        pending = snapshot.pending(conversation)
        votes = interrupts.votes_for(run_input.resume, pending)
        if votes == interrupts.DISMISS:
            translator.follows = deciding.dismiss(scope.user, conversation.pk, via=VIA)
        else:
            outcome = deciding.decide(scope.user, conversation.pk, votes, via=VIA)
            # None: more approvers are needed; the stream shows it still pending.
            translator.follows = outcome.run_id
            translator.resumed_here = True
        return Join(scope=scope, conversation=conversation, translator=translator)
    if run_input.text is None or snapshot.knows_message(
        conversation, run_input.message_id or ""
    ):
        raise InvalidInput(
            "No new user message: the last message must be the person's new one"
        )
    submission = agent_server.add_message(
        scope,
        conversation.pk,
        run_input.text,
        metadata={snapshot.AGUI_ID: run_input.message_id},
    )
    if not submission.held:  # held: the stream shows the approval still pending
        translator.follows = submission.run_id
        translator.waits_for_next = submission.queued
    return Join(scope=scope, conversation=conversation, translator=translator)
