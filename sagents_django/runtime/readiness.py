"""Whether this process should be sent traffic: its database, its channel layer,
and whether it is draining (``runtime.draining``).

A load balancer asks often and without credentials, so every check is bounded
(``CHECK_TIMEOUT``: a dead Redis or a database that never answers costs at most
that), answers in fixed words that reveal nothing of the configuration (never a
URL, a host or an exception's text), and is cached for ``CACHE_SECONDS``, so a
flood of probes costs at most one database round trip and one channel-layer round
trip per process per second. Draining is read on every call: it flips at once.

The database check opens a connection and runs ``SELECT 1`` on a thread of its
own (a new connection each time: a database that refuses new connections is not
ready, whatever an old one says). A probe that hangs keeps that one thread; the
next probes wait for it, within their own timeout, instead of starting more.
The channel-layer check sends a message to a channel of this process and reads it
back through the layer's public API (``new_channel``, ``send``, ``receive``), so
it tests what the sockets use, with the layer's own configuration.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from django.db import DEFAULT_DB_ALIAS, connections

from . import draining, layer

CHECK_TIMEOUT: Final = 2.0
"""Seconds one check may take before it counts as failed."""
CACHE_SECONDS: Final = 1.0
"""How long a database or channel-layer result is reused."""

OK: Final = "ok"
SKIPPED: Final = "skipped"
"""The check does not apply (no channel layer is configured)."""
TIMEOUT: Final = "timeout"
DRAINING: Final = "draining"

CheckName = Literal["database", "channel_layer", "draining"]


@dataclass(kw_only=True, frozen=True)
class Readiness:
    """One answer: ready when every check is ``ok`` or ``skipped``."""

    checks: dict[CheckName, str]
    """Each check's result: ``ok``, ``skipped``, ``timeout``, ``draining``, or
    ``error: <exception class>``."""

    @property
    def ready(self) -> bool:
        return all(value in (OK, SKIPPED) for value in self.checks.values())

    def to_dict(self) -> dict[str, Any]:
        return {"ready": self.ready, "checks": dict(self.checks)}


async def check() -> Readiness:
    """Run the checks (at once, each bounded by ``CHECK_TIMEOUT``)."""
    database, channel_layer = await asyncio.gather(
        _cached("database", check_database), _cached("channel_layer", check_layer)
    )
    return Readiness(
        checks={
            "database": database,
            "channel_layer": channel_layer,
            # Read last: a drain that began during the checks is reported.
            "draining": DRAINING if draining.is_draining() else OK,
        }
    )


def failure(exc: BaseException) -> str:
    """What a failed check says: the exception's class, never its text (which may
    name hosts, users or URLs)."""
    if isinstance(exc, TimeoutError):
        return TIMEOUT
    return f"error: {type(exc).__name__}"


# Caching ------------------------------------------------------------------------
_results: dict[str, tuple[float, str]] = {}
_results_lock = threading.Lock()


async def _cached(name: str, run: Callable[[], Awaitable[str]]) -> str:
    now = time.monotonic()
    with _results_lock:
        hit = _results.get(name)
    if hit is not None and now - hit[0] < CACHE_SECONDS:
        return hit[1]
    result = await run()
    with _results_lock:
        _results[name] = (time.monotonic(), result)
    return result


def forget() -> None:
    """Drop cached results and probe channels (tests)."""
    with _results_lock:
        _results.clear()
    _layer_probes.clear()


# The database ----------------------------------------------------------------------
_database_probe: concurrent.futures.Future[None] | None = None
_database_lock = threading.Lock()


def _ping_database() -> None:
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        connection.close()


def _start_database_probe() -> concurrent.futures.Future[None]:
    """``_ping_database`` on a daemon thread: one stuck in a connect never holds
    up the process's exit."""
    future: concurrent.futures.Future[None] = concurrent.futures.Future()

    def run() -> None:
        # Running, it cannot be cancelled: a timed-out wait leaves it in place,
        # and the next probes wait for it instead of starting more threads.
        future.set_running_or_notify_cancel()
        try:
            _ping_database()
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(None)

    threading.Thread(target=run, name="sagents-ready", daemon=True).start()
    return future


async def check_database() -> str:
    """``SELECT 1`` on a new connection of the default database."""
    global _database_probe
    with _database_lock:
        probe = _database_probe
        if probe is None or probe.done():
            probe = _database_probe = _start_database_probe()
    try:
        await asyncio.wait_for(asyncio.wrap_future(probe), CHECK_TIMEOUT)
    except Exception as exc:
        return failure(exc)
    return OK


# The channel layer -----------------------------------------------------------------
@dataclass(kw_only=True, eq=False)
class _LayerProbe:
    """A channel of this process that probes go through (one per event loop: a
    Redis layer's connections belong to the loop that made them)."""

    layer: Any
    channel: str | None = None
    lock: asyncio.Lock


_layer_probes: dict[asyncio.AbstractEventLoop, _LayerProbe] = {}


async def check_layer() -> str:
    """A message through the default channel layer and back."""
    try:
        channel_layer = layer.get_layer()
    except Exception as exc:  # a layer that cannot even be built
        return failure(exc)
    if channel_layer is None:
        return SKIPPED
    if layer.is_in_memory(channel_layer):
        return OK  # this process's own queues: nothing to reach
    loop = asyncio.get_running_loop()
    probe = _layer_probes.get(loop)
    if probe is None or probe.layer is not channel_layer:
        for stale in [lp for lp in _layer_probes if lp.is_closed()]:
            _layer_probes.pop(stale, None)
        probe = _layer_probes[loop] = _LayerProbe(
            layer=channel_layer, lock=asyncio.Lock()
        )
    try:
        async with asyncio.timeout(CHECK_TIMEOUT):
            async with probe.lock:
                await _round_trip(probe)
    except Exception as exc:
        # A receive cut off by the timeout leaves the channel unsubscribed (the
        # Pub/Sub layer's cleanup): the next probe makes a new one.
        probe.channel = None
        return failure(exc)
    return OK


async def _round_trip(probe: _LayerProbe) -> None:
    if probe.channel is None:
        probe.channel = await probe.layer.new_channel("sagents-ready.")
    nonce = uuid.uuid4().hex
    await probe.layer.send(probe.channel, {"type": "sagents.ready", "nonce": nonce})
    # A late answer to an earlier probe that timed out may come first.
    while (await probe.layer.receive(probe.channel)).get("nonce") != nonce:
        pass
