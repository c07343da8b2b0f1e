"""The core's error tree.

Errors a model can fix (a bad tool argument, a missing file) are never raised: they come
back to the model as error tool results. What is raised here is misuse of the API by the
calling code, or a state that cannot be used::

    SagentsError
    ├── ConfigurationError      an agent, tool or middleware was set up wrongly
    ├── InvalidResume           resume() called with decisions that do not fit the interrupt
    ├── TurnStopped             a middleware ended the turn before a model call (``Stop``)
    ├── StateVersionError       serialized state from an unknown format version
    ├── SerializationError      serialized state that is not valid
    ├── LLMError                the model call failed (after retries and fallbacks)
    │   └── StreamError         the stream broke after it had started
    └── FileSystemError         a virtual filesystem operation was refused (the
                                FileSystem tools turn these into error results;
                                see core.filesystem for the subclasses)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # messages imports nothing from here, but keep the tree import-free
    from .messages import Message


class SagentsError(Exception):
    """Base class of every error raised by sagents_django."""


class ConfigurationError(SagentsError):
    """An agent, tool or middleware was configured wrongly."""


class InvalidResume(SagentsError):
    """Decisions passed to resume() do not match the pending interrupt."""


class TurnStopped(SagentsError):
    """A middleware's ``before_model`` ended the turn (``Stop``): ``reason`` is its
    stable code, ``data`` its JSON details."""

    def __init__(
        self, message: str, *, reason: str, data: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.data = dict(data or {})


class StateVersionError(SagentsError):
    """Serialized state carries a format version this code cannot read."""


class SerializationError(SagentsError):
    """Serialized state is malformed."""


class LLMError(SagentsError):
    """The model call failed after its retries and fallbacks.

    ``retryable`` says whether another attempt could succeed (rate limits, 5xx,
    connection errors), which drives retries and fallbacks in the chain.
    ``status_code`` is the provider's HTTP status, when there was one;
    ``retry_after`` the seconds its ``Retry-After`` header asked to wait.
    ``partial`` is the assistant message assembled from what streamed before the
    failure (marked ``stream_error``), None when nothing had streamed: text that
    already reached people is kept, and such a call is never replayed.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        status_code: int | None = None,
        retry_after: float | None = None,
        partial: Message | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status_code = status_code
        self.retry_after = retry_after
        self.partial = partial


class StreamError(LLMError):
    """The response stream broke (dropped, stalled, malformed, in-band error) mid-way."""
