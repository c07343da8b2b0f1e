"""A conversation's event numbers, and the reply its running turn has streamed so far.

Why one module holds both: a person who opens a conversation while a reply streams
must see the text so far, then the live deltas, with nothing missing and nothing
twice. A socket joins the conversation's group, then reads this buffer: a delta sent
before the join is in the buffer, a later one arrives live. Which live ones the
buffer already holds is told by ``seq``: an event's number is taken and the buffer
changed in one atomic step, before the event is sent, so a reader gets the text of
every delta numbered up to the ``seq`` it reads and of none after it. The same
number tells the joiner which other events were already on their way when it read:
their effects are in the database it reads next, so it skips them (``Floor``).

What is buffered: the top-level (not sub-agent) assistant message being streamed,
as its delta batches (text, thinking, tool-call pieces). It empties when that
message is complete (its row is saved, ``llm_message``), when the run finishes, and
when a run starts, which may be a run another worker took over after a crash: its
reply streams again from the start and must not be shown twice. Beside it, the
running turn's latest todo list (``todos_updated``): the stored state only gets it
when the turn ends, so a page opened mid-turn would draw the plan of before. It is
kept until the run finishes (a run taken over keeps it: its steps' todos stand).

Storage follows the event counter: beside a Redis channel layer, the counter and the
buffer live in that Redis (one Lua script numbers the event and changes the buffer;
the buffer's keys expire, so an abandoned one goes away); beside any other layer, in
this process (the embedded default: publisher and sockets share one process).
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Literal

from . import layer

INFLIGHT_TTL = 900
"""Seconds a buffer lives after its last change (an abandoned one goes away)."""
FLOOR_SECONDS = 60.0
"""How long a joiner skips events numbered up to the ``seq`` it read: those were on
their way when it read, so they arrive within moments. (A counter that expired and
restarted at 1 must not be mistaken for them for ever.)"""
SWEEP_SECONDS = 60.0
"""How often the memory backend forgets the text of expired buffers."""
RUN_KEY = "sagents:inflight:{}:run"
DELTAS_KEY = "sagents:inflight:{}:deltas"
TODOS_KEY = "sagents:inflight:{}:todos"

Operation = Literal["append", "end_message", "start_run", "end_run", "todos", "count"]

_STAMP = """
local seq = redis.call('INCRBY', KEYS[1], ARGV[5])
redis.call('EXPIRE', KEYS[1], ARGV[3])
local op = ARGV[1]
if op == 'append' then
  redis.call('RPUSH', KEYS[3], ARGV[2])
  redis.call('EXPIRE', KEYS[3], ARGV[4])
  redis.call('EXPIRE', KEYS[2], ARGV[4])
  redis.call('EXPIRE', KEYS[4], ARGV[4])
elseif op == 'end_message' then
  redis.call('DEL', KEYS[3])
elseif op == 'start_run' then
  redis.call('DEL', KEYS[3])
  redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[4])
elseif op == 'end_run' then
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
elseif op == 'todos' then
  redis.call('SET', KEYS[4], ARGV[2], 'EX', ARGV[4])
end
if ARGV[6] then
  local n, digits = seq, {}
  for i = 8, 1, -1 do
    digits[i] = string.char(n % 256)
    n = math.floor(n / 256)
  end
  local frame, at = ARGV[7], tonumber(ARGV[8])
  redis.call('PUBLISH', ARGV[6], string.sub(frame, 1, at + 1) ..
    table.concat(digits) .. string.sub(frame, at + 10))
end
return seq
"""
"""Numbers an event and applies its change to the buffer; given a frame (ARGV 6-8:
the channel, the serialized message, the placeholder's offset), writes the number
into it as msgpack's uint64 and publishes it (``layer.pubsub_frame``)."""


@dataclass(kw_only=True, slots=True)
class InFlight:
    """What a conversation's running turn has streamed of its current message."""

    seq: int
    """The number of the conversation's last event when this was read (0: none yet).
    Every delta numbered up to it is in here, none after it."""
    run_id: str | None = None
    """The run streaming (None when no run is known to be running)."""
    text: str = ""
    thinking: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """Tool calls streamed so far, by ``index``: ``{"index", "call_id", "name",
    "arguments"}`` with the arguments' JSON text as far as it came."""
    todos: list[dict[str, Any]] | None = None
    """The running turn's latest todo list (``todos_updated``), newer than the
    stored state's; None when the turn has announced none."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "text": self.text,
            "thinking": self.thinking,
            "tool_calls": self.tool_calls,
        }


def operation(
    event: str, data: dict[str, Any], subagent: dict[str, Any] | None
) -> Operation:
    """What publishing ``event`` does to the buffer."""
    if subagent:
        return "count"  # a sub-agent's stream is not the conversation's reply
    if event == "llm_deltas":
        return "append" if data.get("deltas") else "count"
    if event == "llm_message":
        return "end_message"
    if event == "display_message_saved":
        # The assistant's row is saved (and announced) just before ``llm_message``:
        # from then on the reply is in the database, not in flight.
        row = data.get("display_message")
        if isinstance(row, dict) and row.get("message_type") == "assistant":
            return "end_message"
        return "count"
    if event == "run_started":
        return "start_run"
    if event == "run_finished":
        return "end_run"
    if event == "todos_updated" and isinstance(data.get("todos"), list):
        return "todos"
    return "count"


def fold(
    batches: list[list[dict[str, Any]]],
) -> tuple[str, str, list[dict[str, Any]]]:
    """Delta batches as (text, thinking, tool calls by index)."""
    text: list[str] = []
    thinking: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for batch in batches:
        for delta in batch:
            if not isinstance(delta, dict):
                continue
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            if isinstance(delta.get("thinking"), str):
                thinking.append(delta["thinking"])
            for piece in delta.get("tool_calls") or []:
                if not isinstance(piece, dict) or not isinstance(
                    piece.get("index"), int
                ):
                    continue
                index = piece["index"]
                call = calls.setdefault(
                    index,
                    {"index": index, "call_id": None, "name": None, "arguments": ""},
                )
                call["call_id"] = call["call_id"] or piece.get("call_id")
                call["name"] = call["name"] or piece.get("name")
                call["arguments"] += str(piece.get("arguments") or "")
    return "".join(text), "".join(thinking), [calls[i] for i in sorted(calls)]


async def stamp(
    conversation_id: str,
    event: str,
    data: dict[str, Any],
    *,
    subagent: dict[str, Any] | None = None,
    frame: layer.Frame | None = None,
) -> int:
    """The next number of ``conversation_id``'s events, taken in one step with the
    change ``event`` makes to the buffer. Call it before sending the event, on the
    loop that publishes (beside Redis it uses that loop's client, as
    ``layer.next_seq`` does). With a ``frame`` (``layer.pubsub_frame``), the same
    step publishes it, numbered: nothing is left to send."""
    op = operation(event, data, subagent)
    url = _url()
    if url is None:
        return _memory_stamp(conversation_id, op, data)
    if op == "append":
        payload = json.dumps(data["deltas"], ensure_ascii=False, separators=(",", ":"))
    elif op == "todos":
        payload = json.dumps(data["todos"], ensure_ascii=False, separators=(",", ":"))
    elif op == "start_run":
        payload = str(data.get("run_id") or "")
    else:
        payload = ""
    keys = _keys(conversation_id)
    # The counter also moves past events lost before they could be numbered, so
    # the client sees a gap where they were (layer.numbering).
    with layer.numbering(url, keys[0]) as step:
        args: list[Any] = [op, payload, layer.SEQ_TTL, INFLIGHT_TTL, step]
        if frame is not None:
            args += [frame.channel, frame.payload, frame.offset]
        value = await _script(layer.redis_client(url))(keys=keys, args=args)
    return int(value)


_scripts: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _script(client: Any) -> Any:
    """The stamping script of ``client`` (registering one hashes the script's
    text: once per client, not once per event)."""
    script = _scripts.get(client)
    if script is None:
        script = _scripts[client] = client.register_script(_STAMP)
    return script


async def read(conversation_id: str) -> InFlight:
    """The buffer of ``conversation_id`` and the number of its last event, read
    together."""
    url = _url()
    if url is None:
        return _memory_read(conversation_id)
    # Rare (a socket subscribing): a blocking client in a thread, which leaves no
    # connection behind on the caller's loop (layer.sync_redis_client).
    return await asyncio.to_thread(_redis_read, url, conversation_id)


def _redis_read(url: str, conversation_id: str) -> InFlight:
    seq_key, run_key, deltas_key, todos_key = _keys(conversation_id)
    with layer.sync_redis_client(url).pipeline(transaction=True) as pipe:
        pipe.get(seq_key)
        pipe.get(run_key)
        pipe.lrange(deltas_key, 0, -1)
        pipe.get(todos_key)
        seq, run_id, raw, raw_todos = pipe.execute()
    batches = []
    for item in raw:
        try:
            batches.append(json.loads(item))
        except ValueError:
            continue
    text, thinking, calls = fold(batches)
    return InFlight(
        seq=int(seq or 0),
        run_id=run_id.decode() if run_id else None,
        text=text,
        thinking=thinking,
        tool_calls=calls,
        todos=_todos(raw_todos),
    )


def _todos(raw: Any) -> list[dict[str, Any]] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return (
        [t for t in value if isinstance(t, dict)] if isinstance(value, list) else None
    )


def _url() -> str | None:
    # The counter's rule (layer.next_seq): Redis beside a Redis layer, else memory.
    return layer.plan().url


@functools.lru_cache(maxsize=1024)
def _keys(conversation_id: str) -> tuple[str, str, str, str]:
    return (
        layer.SEQ_KEY.format(conversation_id),
        RUN_KEY.format(conversation_id),
        DELTAS_KEY.format(conversation_id),
        TODOS_KEY.format(conversation_id),
    )


class Floor:
    """What a socket skips after reading a buffer: the events numbered up to the
    ``seq`` it read (already in the buffer, or in the database it reads next), until
    the first later event arrives or ``FLOOR_SECONDS`` pass."""

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self.until = time.monotonic() + FLOOR_SECONDS
        self.done = False

    def skips(self, seq: Any) -> bool:
        if self.done or not isinstance(seq, int):
            return False
        if seq <= self.seq and time.monotonic() < self.until:
            return True
        self.done = True
        return False


# The memory backend -----------------------------------------------------------------
@dataclass(kw_only=True, slots=True)
class _Entry:
    seq: int = 0
    run_id: str | None = None
    batches: list[list[dict[str, Any]]] = field(default_factory=list)
    todos: list[dict[str, Any]] | None = None
    expires: float = 0.0


_entries: dict[str, _Entry] = {}
_lock = threading.Lock()
_next_sweep = 0.0


def _memory_stamp(conversation_id: str, op: Operation, data: dict[str, Any]) -> int:
    global _next_sweep
    now = time.monotonic()
    with _lock:
        if now >= _next_sweep:
            _next_sweep = now + SWEEP_SECONDS
            for stale in _entries.values():
                if stale.expires <= now:
                    stale.run_id, stale.batches, stale.todos = None, [], None
        entry = _entries.setdefault(conversation_id, _Entry())
        entry.seq += 1
        if entry.expires <= now:
            entry.run_id, entry.batches, entry.todos = None, [], None
        if op == "append":
            entry.batches.append([dict(d) for d in data["deltas"]])
            entry.expires = now + INFLIGHT_TTL
        elif op == "end_message":
            entry.batches = []
        elif op == "start_run":
            entry.run_id = str(data.get("run_id") or "") or None
            entry.batches = []
            entry.expires = now + INFLIGHT_TTL
        elif op == "end_run":
            entry.run_id, entry.batches, entry.todos = None, [], None
        elif op == "todos":
            entry.todos = [dict(t) for t in data["todos"] if isinstance(t, dict)]
            entry.expires = now + INFLIGHT_TTL
        return entry.seq


def _memory_read(conversation_id: str) -> InFlight:
    with _lock:
        entry = _entries.get(conversation_id)
        if entry is None:
            return InFlight(seq=0)
        if entry.expires <= time.monotonic():
            return InFlight(seq=entry.seq)
        seq, run_id, batches = entry.seq, entry.run_id, list(entry.batches)
        todos = None if entry.todos is None else list(entry.todos)
    text, thinking, calls = fold(batches)
    return InFlight(
        seq=seq,
        run_id=run_id,
        text=text,
        thinking=thinking,
        tool_calls=calls,
        todos=todos,
    )


def forget_in_process(conversation_id: str) -> bool:
    """Drop the conversation's counter and buffer of this process (erasure; the
    Redis backend's keys are ``_keys``); whether there were any."""
    with _lock:
        return _entries.pop(conversation_id, None) is not None
