"""Limits: the bounds the core enforces and the persistence layer relies on.

Why one module: a turn must never produce what cannot be saved, and no single tool
call may hang or exhaust the process that runs many turns. So the numbers that decide
what the core accepts (how deep and how large a model's tool-call arguments may be,
how large a message or a tool result is, how large a file is, how long a file tool
may run) are defined here, once. The core refuses or trims what exceeds them with
something the model can read; the Django layer (``services.validation``) imports the
same constants to validate what it stores, so a limit can never drift between the
two. This module imports nothing from the package, so any layer may import it.

Depth is counted as the stored-state validator counts it: the outermost dict or list
of a document is level 1, each container inside it one level more; scalars add none.
``{"a": 1}`` has depth 1, ``{"a": [1]}`` depth 2.
"""

from __future__ import annotations

import operator
import re
from itertools import accumulate
from typing import Any

__all__ = [
    "ARGUMENTS_ENVELOPE_DEPTH",
    "FILE_TOOL_TIME_BUDGET",
    "MAX_ARGUMENT_CHARS",
    "MAX_ARGUMENT_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_PATH_SEGMENTS",
    "MAX_PATTERN_CHARS",
    "MAX_STATE_DEPTH",
    "MAX_SUBAGENT_NESTING",
    "MAX_TOOL_RESULT_CHARS",
    "OWN_CALL_PATH",
    "REGEX_MAX_MEMORY",
    "REGEX_WORK_PER_CALL",
    "SUBAGENT_LEVEL_PATH",
    "json_text_too_deep",
    "value_bounds_problem",
]

# Stored documents -----------------------------------------------------------------
MAX_STATE_DEPTH = 100
"""Deepest nesting of a stored document (a serialized state, a display row): deeper
is refused on save and on load, a guard against hostile payloads and recursion."""

OWN_CALL_PATH: tuple[str, ...] = (
    "the envelope {'version', 'state', ...}",
    "state",
    "messages",
    "the assistant message",
    "tool_calls",
    "the call",
)
"""The containers above the ``arguments`` of a call the agent itself made, in its
stored state (``serialize_server_state``)."""

SUBAGENT_LEVEL_PATH: tuple[str, ...] = (
    "messages",
    "the tool message",
    "tool_results",
    "the task call's result",
    "interrupt_data",
    "_run (the paused sub-agent)",
    "its envelope",
    "state",
)
"""What each sub-agent paused for approval adds above the calls of its own
conversation: that conversation travels inside the interrupt data of the ``task``
call's result in its parent's state (``SubAgentRun.dump``), once per level."""

MAX_SUBAGENT_NESTING = 3
"""Deepest chain of sub-agents: a sub-agent may start sub-agents, which may start
their own, this many levels below the agent; deeper, ``task`` answers with an error."""

ARGUMENTS_ENVELOPE_DEPTH = len(OWN_CALL_PATH) + MAX_SUBAGENT_NESTING * len(
    SUBAGENT_LEVEL_PATH
)
"""Levels a stored state adds above a tool call's arguments, at most (a call of a
sub-agent nested ``MAX_SUBAGENT_NESTING`` deep). A test finds these paths in states
made by the real serializers."""

MAX_ARGUMENT_DEPTH = MAX_STATE_DEPTH - ARGUMENTS_ENVELOPE_DEPTH
"""Deepest tool-call arguments the core accepts (the arguments object is level 1):
exactly what still fits in a stored state at ``MAX_STATE_DEPTH``."""

# Sizes ----------------------------------------------------------------------------
MAX_FILE_BYTES = 1024 * 1024
"""Default largest file of the virtual filesystem, in bytes of UTF-8 (about 250,000
tokens, more than a model should write in one file). File tools keep their transient
memory within a small multiple of the configured file size limit."""

MAX_ARGUMENT_CHARS = 4 * MAX_FILE_BYTES
"""Longest tool-call arguments, as characters of JSON text: room for a whole file in
``write_file``'s arguments, with JSON's escapes."""

MAX_MESSAGE_BYTES = 8 * 1024 * 1024
"""Largest message a caller may add to a conversation, as UTF-8 bytes of its stored
JSON (attachments included). A site's ``SAGENTS["MAX_STATE_BYTES"]`` should leave
room for several."""

MAX_TOOL_RESULT_CHARS = 256 * 1024
"""Longest tool result the model reads (about 64,000 tokens). Longer results are cut
with a note saying so; file tools stop at it and say how to read on."""

# File tools -----------------------------------------------------------------------
FILE_TOOL_TIME_BUDGET = 5.0
"""Seconds one file tool call may take before it answers with an error."""

MAX_PATTERN_CHARS = 1000
"""Longest ``ls`` wildcard or ``search_text`` pattern."""

MAX_PATH_SEGMENTS = 64
"""Deepest virtual path: each segment may become a directory to create or walk."""

REGEX_MAX_MEMORY = 8 * 1024 * 1024
"""Memory one compiled search pattern may use (RE2's ``max_mem``): a pattern needing
more is refused while compiling, before it can grow."""

REGEX_WORK_PER_CALL = 1 << 25
"""Pattern instructions times bytes searched in one uninterruptible engine call
(a few hundred milliseconds at worst); the search checks its deadline in between."""


# Checks ---------------------------------------------------------------------------
# Everything but brackets and quotes is dropped; one kind of bracket stands for both
# (depth does not care which).
_DROP = bytes(sorted(set(range(256)) - set(b'[]{}"')))
_ONE_KIND = bytes.maketrans(b"{}", b"[]")
_RUN = re.compile(rb"\[+|\]+")


def json_text_too_deep(text: str, limit: int) -> bool:
    """Whether the JSON ``text`` nests containers deeper than ``limit``.

    Linear and without recursion, so it can run before ``json.loads`` (whose
    recursion is what must be avoided), and quick enough for the event loop: the
    work is a few C-level passes over the text. Malformed text gives some answer
    and is refused by the parser next.
    """
    if text.count("[") + text.count("{") <= limit:
        return False  # the common case: too few brackets to nest that deep
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:
        # Inside strings a backslash escapes the next character: drop escaped
        # backslashes (pairs, from the left, as the parser reads them), then
        # escaped quotes; what other escapes leave is dropped with the rest.
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    data = data.translate(_ONE_KIND, _DROP)
    if b'"' in data:
        data = b"".join(data.split(b'"')[::2])  # brackets inside strings go
    removed = 0
    while data:
        # A pass drops the innermost pairs: exactly one level. While that shrinks
        # the text a lot, passes are cheap; once it does not, there are few peaks,
        # hence few runs of brackets to walk one by one.
        peaks = data.count(b"[]")
        if peaks * 32 < len(data):  # no peak at all: unclosed brackets, counted too
            return _runs_too_deep(data, limit - removed)
        data = data.replace(b"[]", b"")
        removed += 1
        if removed > limit:
            return True
    return False


def _runs_too_deep(data: bytes, limit: int) -> bool:
    # Runs of "[" and of "]" alternate: the depth after the i-th run of "[" is the
    # sum of the first i+1 of those minus the sum of the first i runs of "]".
    runs = _RUN.findall(data)
    if runs and runs[0][:1] != b"[":
        return False  # the parser stops at that closing bracket
    opens = accumulate(map(len, runs[0::2]))
    closes = accumulate(map(len, runs[1::2]), initial=0)
    return max(map(operator.sub, opens, closes), default=0) > limit


def value_bounds_problem(
    value: Any,
    *,
    max_depth: int = MAX_ARGUMENT_DEPTH,
    max_chars: int = MAX_ARGUMENT_CHARS,
) -> str | None:
    """Why a parsed JSON value is too deep or too large, else None.

    Iterative (and quick: it runs on every tool call made); the size is estimated
    from the strings and keys, a lower bound of the JSON text's length, enough to
    refuse a value far over ``max_chars``.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    chars = 0
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            try:
                chars += sum(map(len, node))  # keys: strings, in JSON
            except TypeError:
                chars += sum(len(k) for k in node if type(k) is str)
            items: Any = node.values()
        elif isinstance(node, list | tuple):
            items = node
        else:
            continue
        if depth > max_depth:
            return f"they nest deeper than {max_depth} levels"
        chars += 4 * len(items)
        for item in items:
            kind = type(item)
            if kind is str:
                chars += len(item)
            elif kind not in _SCALARS:
                stack.append((item, depth + 1))
        if chars > max_chars:
            return f"they are longer than {max_chars} characters"
    return None


_SCALARS = frozenset((int, float, bool, type(None)))
