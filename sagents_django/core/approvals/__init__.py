"""Approvals as types: action requests, decisions and the interrupts that wait for them.

The runtime, the socket protocol, the approval forms and the admin read and write
these; each class has one JSON form (``to_dict`` / ``from_dict``). What a person or a
script sends is checked in one place, ``decisions`` (each decision) with
``HITLInterrupt.check_decisions`` (their fit to the interrupt), and errors name the
bad field (``decisions[1].arguments must be an object, not 'x'``).

Decisions, one per action request and in its order, as a browser form or a script
posts them to ``resume``::

    {"type": "approve"}                                  # run the call as asked
    {"type": "edit", "arguments": {"path": "safe.md"}}   # run it with these arguments
    {"type": "reject"}                                   # do not run it
    {"type": "reject", "message": "Not that file."}      # ... and tell the model why

``Approve()``, ``Edit(arguments=...)`` and ``Reject(message=...)`` are the same in
Python; ``resume`` takes either form.

An interrupt waiting for decisions (``AgentResult.interrupt_data``; typed as
``AgentResult.interrupt`` and ``State.interrupt``)::

    {"type": "hitl",
     "action_requests": [
       {"tool_call_id": "call_1", "tool_name": "write_file",
        "arguments": {"path": "notes.md"},
        "allowed_decisions": ["approve", "edit", "reject"],
        "description": "Write notes.md",        # optional, for the person
        "middleware_id": "..."}],               # the middleware that asked (gets the
                                                # decisions); set by the loop
     "review_configs": {"write_file": {"allowed_decisions": [...]}},  # Sagents' shape,
     "hitl_tool_call_ids": ["call_1"]}                                # derived

    {"type": "subagent", "subagent": "researcher", "subagent_id": "...",
     "tool_call_id": "call_7",                  # the parent's task call that paused
     "action_requests": [{..., "subagent": "researcher"}],  # derived: what to decide
     "interrupt": {...}}                        # the sub-agent's own interrupt

A sub-agent's interrupt takes the same decisions as a ``hitl`` one: one per entry of
its ``action_requests``. Any other dict a middleware raised is a ``CustomInterrupt``.
States written before these types (no ``type`` key, allowed decisions only in
``review_configs``, sub-agent requests flattened beside ``subagent_type``) still load.
"""

from .decisions import (
    DECISION_TYPES,
    MAX_EDIT_BYTES,
    MAX_EDIT_DEPTH,
    MAX_REJECT_MESSAGE,
    Approve,
    Decision,
    DecisionType,
    Edit,
    Reject,
    decision_from_dict,
    decisions_from_list,
)
from .interrupts import (
    ActionRequest,
    CustomInterrupt,
    HITLInterrupt,
    PendingInterrupt,
    ReviewContext,
    SubAgentInterrupt,
    interrupt_from_dict,
    interrupt_to_dict,
)

__all__ = [
    "DECISION_TYPES",
    "MAX_EDIT_BYTES",
    "MAX_EDIT_DEPTH",
    "MAX_REJECT_MESSAGE",
    "ActionRequest",
    "Approve",
    "CustomInterrupt",
    "Decision",
    "DecisionType",
    "Edit",
    "HITLInterrupt",
    "PendingInterrupt",
    "Reject",
    "ReviewContext",
    "SubAgentInterrupt",
    "decision_from_dict",
    "decisions_from_list",
    "interrupt_from_dict",
    "interrupt_to_dict",
]
