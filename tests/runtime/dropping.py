"""Channel layers that lose messages: a tenth of group sends vanish, as they may from a
full channel or a Redis reconnect (the layers deliver at most once).

Name one in ``CHANNEL_LAYERS["default"]["BACKEND"]``; ``CONFIG["drop_rate"]`` and
``CONFIG["seed"]`` set the rate (0.1) and the random sequence. What was dropped is
kept in ``layer.dropped``.
"""

from __future__ import annotations

import random
from typing import Any

from channels.layers import InMemoryChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer


class Dropping:
    """The dropping part, mixed into a real layer."""

    drop_rate: float
    dropped: list[dict[str, Any]]
    sent: int
    _random: random.Random

    def _setup(self, drop_rate: float, seed: int) -> None:
        self.drop_rate = drop_rate
        self.dropped = []
        self.sent = 0
        self._random = random.Random(seed)

    def drops(self, message: dict[str, Any]) -> bool:
        self.sent += 1
        if self._random.random() < self.drop_rate:
            self.dropped.append(message)
            return True
        return False


class DroppingInMemoryChannelLayer(Dropping, InMemoryChannelLayer):
    def __init__(self, drop_rate: float = 0.1, seed: int = 7, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._setup(drop_rate, seed)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        if not self.drops(message):
            await super().group_send(group, message)


class DroppingRedisPubSubChannelLayer(Dropping, RedisPubSubChannelLayer):
    def __init__(
        self, *args: Any, drop_rate: float = 0.1, seed: int = 7, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._setup(drop_rate, seed)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        # The layer proxies its methods to a layer per event loop (__getattr__).
        if not self.drops(message):
            await self._get_layer().group_send(group, message)
