"""The pure-Python agent core: no Django, Channels or Celery import anywhere below.

The public API is the names in ``__all__``. litellm is imported lazily, on the first
model call through it.
"""

from __future__ import annotations

from .agent import Agent, build_default_middleware, to_state
from .callbacks import CALLBACK_KEYS, Callbacks
from .display import extract_display_items
from .exceptions import (
    ConfigurationError,
    InvalidResume,
    LLMError,
    MiddlewareError,
    SagentsError,
    SerializationError,
    StateVersionError,
    StreamError,
)
from .llm import ChatModel, ModelRequest
from .messages import (
    ContentPart,
    Message,
    MessageDelta,
    TokenUsage,
    ToolCall,
    ToolCallDelta,
    ToolResult,
    messages_from_openai,
    messages_to_openai,
)
from .middleware.base import Interrupt, Middleware, MiddlewareEntry, Resume
from .middleware.human_in_the_loop import HumanInTheLoop
from .modes import AgentExecution, AgentResult, Execution
from .serialization import StateSerializer
from .shortcuts import execute, execute_async, new
from .state import State, merge_states
from .todo import Todo
from .tools import Tool, ToolContext, tool

__all__ = [
    "CALLBACK_KEYS",
    "Agent",
    "AgentExecution",
    "AgentResult",
    "Callbacks",
    "ChatModel",
    "ConfigurationError",
    "ContentPart",
    "Execution",
    "HumanInTheLoop",
    "Interrupt",
    "InvalidResume",
    "LLMError",
    "Message",
    "MessageDelta",
    "Middleware",
    "MiddlewareEntry",
    "MiddlewareError",
    "ModelRequest",
    "Resume",
    "SagentsError",
    "SerializationError",
    "State",
    "StateSerializer",
    "StateVersionError",
    "StreamError",
    "Todo",
    "TokenUsage",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolContext",
    "ToolResult",
    "build_default_middleware",
    "execute",
    "execute_async",
    "extract_display_items",
    "merge_states",
    "messages_from_openai",
    "messages_to_openai",
    "new",
    "to_state",
    "tool",
]
