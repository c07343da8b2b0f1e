"""kombu's Redis transport, made to survive the broker's Redis restarting mid-turn.

Set ``CELERY_BROKER_TRANSPORT = "sagents_django.redis_broker:Transport"`` with a
``redis://`` (or ``rediss://``) ``CELERY_BROKER_URL``.

Why: with celery 5.7 / kombu 5.7, a worker that holds an unacknowledged task (every
running turn: ``run_agent_turn`` is ``acks_late``) when the broker's connection drops
dies with "Unrecoverable error: AttributeError('NoneType' object has no attribute
'hostname')". On the connection error, Celery's consumer first calls
``Connection.collect()``: closing the channel fails there (its pending BRPOP reads a
dead socket), the error is swallowed, and the transport is detached from the
connection anyway (``transport.client = None``). Then it calls ``connection.close()``
(added by celery PR #10242, GH-9705), which closes the channel again; the channel
tries to give the unacknowledged task back to Redis and, having no pool left, builds
one from ``transport.client.hostname``. The AttributeError is not a connection
error, so ``ignore_errors`` lets it escape and the worker shuts down. The late ack of
that task, when its turn ends, takes the same path. The same symptom was reported
long ago as kombu #582; no release of either package fixes it yet.

The fix: a channel whose transport was detached raises a connection error instead,
which both paths already handle (the close is ignored, the ack is logged as not
done). The task message is not lost by this: a Redis that kept its data re-delivers
it after the visibility timeout, and the delivery finds the run finished; a Redis
that restarted empty has nothing to give back. Either way the run's lease, not the
message, decides who runs the turn.
"""

from __future__ import annotations

from typing import Any

try:
    from kombu.transport import redis as kombu_redis
    from redis.exceptions import ConnectionError as RedisConnectionError
except ImportError as exc:
    raise ImportError(
        "Running turns on Celery needs it: pip install 'sagents-django[celery]'"
    ) from exc


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:
            raise RedisConnectionError(
                "The broker connection of this channel is closed"
            )
        params: dict[str, Any] = super()._connparams(asynchronous=asynchronous)
        return params


class Transport(kombu_redis.Transport):
    Channel = Channel
