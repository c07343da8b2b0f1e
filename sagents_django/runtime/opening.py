"""Opening a turn (in a thread: the database and the site's factory).

``open_turn(run)`` builds the ``Turn`` of a claimed run: its scope, tenure,
publisher and recorder, the agent from the site's factory, the stored state, and
where the attempt starts (fresh, or a takeover going on from the last checkpoint
of the attempt before). A failure here is kept on the turn as ``setup_error``: the
turn then ends the run as an error instead of leaving its conversation held.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.utils.module_loading import import_string

from sagents_django import services
from sagents_django.budgets import turns as budget_turns
from sagents_django.conf import sagents_settings
from sagents_django.core import CancelToken, State
from sagents_django.core.serialization import deserialize_server_state
from sagents_django.models import AgentRun
from sagents_django.persistence import DjangoDisplayMessagePersistence
from sagents_django.scope import scope_class
from sagents_django.sharing import filesystems

from . import checkpoints, runs
from .agents import build_agent
from .checkpoints import Checkpoints
from .database import db
from .file_scopes import site_filesystem_scope
from .publisher import Publisher
from .recorder import Recorder
from .requests import RunRequest
from .tenure import Tenure
from .turn import Turn

logger = logging.getLogger(__name__)


def open_turn(run: AgentRun) -> Turn:
    request = RunRequest.of(run)
    scope = scope_class().from_dict(request.scope or {"user_id": None})
    conversation = services.get_conversation(scope, run.conversation_id)
    conversation_id = str(run.conversation_id)
    lease = runs.lease_of(run)
    cancel = CancelToken()
    tenure = Tenure(lease=lease, cancel=cancel)
    window = sagents_settings.DELTA_WINDOW_MS / 1000
    publisher = Publisher(conversation_id, window=window)
    turn = Turn(
        agent_run=run,
        scope=scope,
        request=request,
        conversation_id=conversation_id,
        agent_id=conversation.agent_id if conversation is not None else "",
        tenure=tenure,
        publisher=publisher,
        cancel=cancel,
        recorder=Recorder(
            scope=scope,
            conversation_id=conversation_id,
            display=DjangoDisplayMessagePersistence(),
            publisher=publisher,
            tenure=tenure,
            context=lambda *a, **k: turn.context(*a, **k),
            checkpoints=Checkpoints(lease=lease, base_revision=0, state=State()),
        ),
        filesystem_scope=_filesystem_scope(request.filesystem_scope),
    )
    try:
        if conversation is None:
            raise PermissionError("The run's user can no longer see this conversation")
        turn.agent_persistence = import_string(sagents_settings.AGENT_PERSISTENCE)()
        turn.recorder.display = import_string(sagents_settings.DISPLAY_PERSISTENCE)()
        if turn.filesystem_scope is None:  # the call named none: the site's
            turn.filesystem_scope = site_filesystem_scope(scope, conversation)
            filesystems.claim(scope, conversation)  # its owner's, recorded
        else:  # asked again: a share revoked since the message was sent
            filesystems.check_named(scope, conversation.pk, turn.filesystem_scope)
        turn.agent = build_agent(turn.agent_id, scope, turn.filesystem_scope)
        turn.recorder.ledger = budget_turns.attach(
            turn.agent,
            scope=scope,
            conversation_id=conversation_id,
            run_id=turn.run_id,
            run_sync=db,
            warn=partial(budget_turns.announce_warning, turn.recorder),
        )
        _load(turn)
        _resume_checkpoints(turn)
    except Exception as exc:
        logger.exception("Could not open run %s", run.pk)
        turn.setup_error = exc
    return turn


def _load(turn: Turn) -> None:
    assert turn.agent is not None
    stored = turn.agent_persistence.load_stored(turn.scope, turn.context())
    if stored.data is None:
        turn.state = State(agent_id=turn.agent_id)
    else:
        turn.state = deserialize_server_state(
            turn.agent_id, stored.data, middleware=turn.agent.middleware
        )
    turn.revision = stored.revision


def _resume_checkpoints(turn: Turn) -> None:
    """Where this attempt starts: the state as loaded, or (a takeover) the last
    checkpoint of the attempt before."""
    lease = turn.tenure.lease
    base = turn.agent_run.checkpoint_revision
    if base is not None:  # an earlier attempt got as far as changing the state
        if turn.revision == base:
            resumed = checkpoints.resume_from(lease, base, turn.state)
            turn.recorder.checkpoints = resumed
            turn.state = resumed.state
            turn.start = "continuing"
            return
        if turn.revision > base:
            turn.start = "ended_saved"
    turn.recorder.checkpoints = Checkpoints(
        lease=lease, base_revision=turn.revision, state=turn.state
    )


def _filesystem_scope(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
