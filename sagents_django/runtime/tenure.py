"""A worker's tenure of a run: its lease, the heartbeat that renews it, and the two
ways it ends early.

- **Lost**: another worker took the run over (this one paused past its lease); the
  turn stops and writes nothing more, what it would write belongs to the other.
- **Handed over**: this worker drains (a deploy); the turn stops at its next safe
  point (never between a reply with tool calls and the end of its step, whose calls
  the next worker could not tell apart from ones that never ran) and gives the run
  back to the queue from its last checkpoint.

One small state machine instead of four flags on the turn.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from dataclasses import dataclass
from typing import Literal

from sagents_django.conf import sagents_settings
from sagents_django.core import CancelToken

from . import runs
from .database import db
from .executors import get_executor

logger = logging.getLogger(__name__)


def worker_name() -> str:
    """Who holds a run: host, process and a per-process token."""
    return f"{socket.gethostname()}:{os.getpid()}:{_TOKEN}"


_TOKEN = uuid.uuid4().hex[:8]

TenureState = Literal["holding", "handing_off", "handed_off", "lost"]


@dataclass(kw_only=True, eq=False)
class Tenure:
    lease: runs.Lease
    cancel: CancelToken
    state: TenureState = "holding"
    in_tools: bool = False
    """Between a reply with tool calls and the end of its step (a handoff waits)."""

    @property
    def run_id(self) -> str:
        return str(self.lease.run_id)

    @property
    def lost(self) -> bool:
        return self.state == "lost"

    @property
    def handed_off(self) -> bool:
        return self.state == "handed_off"

    @property
    def ended(self) -> bool:
        """This worker no longer writes for the run."""
        return self.state in ("lost", "handed_off")

    async def heartbeat(self) -> None:
        """Renew the lease every ``HEARTBEAT_SECONDS`` until cancelled; a cancel
        asked by the row reaches the turn here when its control message did not."""
        while True:
            await asyncio.sleep(sagents_settings.HEARTBEAT_SECONDS)
            try:
                if await db(runs.beat)(self.lease):
                    self.cancel.cancel("Cancelled")
            except runs.LeaseLost:
                self.lose()
                return
            except Exception:
                logger.warning("Heartbeat of run %s failed", self.run_id, exc_info=True)

    def lose(self) -> None:
        """Another worker holds the run now: stop, write nothing more."""
        if self.state != "lost":
            logger.warning("Run %s was taken over by another worker", self.run_id)
        self.state = "lost"
        self.cancel.cancel("Taken over")

    def hand_off(self) -> None:
        """The worker drains: stop now, or after the running tools' step."""
        if self.state == "holding":
            self.state = "handing_off"
            if not self.in_tools:
                self._stop_for_handoff()

    def tools_started(self) -> None:
        self.in_tools = True

    def step_ended(self) -> None:
        self.in_tools = False
        if self.state == "handing_off":
            self._stop_for_handoff()

    def _stop_for_handoff(self) -> None:
        self.state = "handed_off"
        self.cancel.cancel("Handed over")

    async def release(self) -> str:
        """Give the run back to the queue from its last checkpoint, for another
        worker to go on at once."""
        if await db(runs.release)(self.lease):
            if sagents_settings.EXECUTOR == "celery":  # an inline one dies with us
                await get_executor().asubmit(self.run_id)
            logger.info("Run %s handed over (this worker drains)", self.run_id)
        return "handed_over"
