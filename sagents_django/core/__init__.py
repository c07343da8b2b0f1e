"""The pure-Python agent core: no Django, Channels or Celery import anywhere below.

The public API is the names in ``__all__``. litellm is imported lazily, on the first
model call through it.
"""

from __future__ import annotations

from .agent import Agent, build_default_middleware, to_state
from .approvals import (
    ActionRequest,
    Approve,
    CustomInterrupt,
    Decision,
    Edit,
    HITLInterrupt,
    PendingInterrupt,
    Reject,
    ReviewContext,
    SubAgentInterrupt,
    decision_from_dict,
    interrupt_from_dict,
)
from .callbacks import CALLBACK_KEYS, Callbacks
from .cancellation import CancelToken
from .compat import aexecute, execute, new
from .display import extract_display_items
from .events import EVENTS, emit
from .exceptions import (
    ConfigurationError,
    InvalidResume,
    LLMError,
    SagentsError,
    SerializationError,
    StateVersionError,
    StreamError,
    TurnStopped,
)
from .filesystem import (
    DiskPersistence,
    FileEntry,
    FileMetadata,
    FileSystemConfig,
    FileSystemError,
    FileSystemState,
    MemoryPersistence,
    Persistence,
    get_filesystem,
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
)
from .middleware.base import Interrupt, Middleware, MiddlewareEntry, Resume, Stop
from .middleware.conversation_title import ConversationTitle
from .middleware.filesystem import FileSystem
from .middleware.human_in_the_loop import HumanInTheLoop
from .middleware.patch_tool_calls import PatchToolCalls, patch_dangling_tool_calls
from .middleware.spend_budget import (
    BudgetDecision,
    BudgetStore,
    CallEstimate,
    SpendBudget,
)
from .middleware.subagent import SubAgent
from .middleware.summarization import Summarization
from .middleware.todo_list import TodoList
from .modes import AgentExecution, AgentResult, Execution, Inbox
from .openai_format import messages_from_openai, messages_to_openai
from .outbox import QueuedFromTool
from .persistence import (
    AgentPersistence,
    DisplayMessagePersistence,
    PersistenceContext,
)
from .preprocessing import (
    MentionExpander,
    MessagePreprocessor,
    PreprocessContext,
    apreprocess,
    preprocess,
)
from .serialization import StateSerializer
from .state import State, merge_states
from .subagents import CompiledSubAgent, SubAgentConfig
from .todo import Todo
from .tokens import count_tokens
from .tool_access import ToolAccess
from .tools import Tool, ToolContext, ToolOutput, tool

__all__ = [
    "CALLBACK_KEYS",
    "EVENTS",
    "ActionRequest",
    "Agent",
    "AgentExecution",
    "AgentPersistence",
    "AgentResult",
    "Approve",
    "BudgetDecision",
    "BudgetStore",
    "CallEstimate",
    "Callbacks",
    "CancelToken",
    "ChatModel",
    "CompiledSubAgent",
    "ConfigurationError",
    "ContentPart",
    "ConversationTitle",
    "CustomInterrupt",
    "Decision",
    "DiskPersistence",
    "DisplayMessagePersistence",
    "Edit",
    "Execution",
    "FileEntry",
    "FileMetadata",
    "FileSystem",
    "FileSystemConfig",
    "FileSystemError",
    "FileSystemState",
    "HITLInterrupt",
    "HumanInTheLoop",
    "Inbox",
    "Interrupt",
    "InvalidResume",
    "LLMError",
    "MemoryPersistence",
    "MentionExpander",
    "Message",
    "MessageDelta",
    "MessagePreprocessor",
    "Middleware",
    "MiddlewareEntry",
    "ModelRequest",
    "PatchToolCalls",
    "PendingInterrupt",
    "Persistence",
    "PersistenceContext",
    "PreprocessContext",
    "QueuedFromTool",
    "Reject",
    "Resume",
    "ReviewContext",
    "SagentsError",
    "SerializationError",
    "SpendBudget",
    "State",
    "StateSerializer",
    "StateVersionError",
    "Stop",
    "StreamError",
    "SubAgent",
    "SubAgentConfig",
    "SubAgentInterrupt",
    "Summarization",
    "Todo",
    "TodoList",
    "TokenUsage",
    "Tool",
    "ToolAccess",
    "ToolCall",
    "ToolCallDelta",
    "ToolContext",
    "ToolOutput",
    "ToolResult",
    "TurnStopped",
    "aexecute",
    "apreprocess",
    "build_default_middleware",
    "count_tokens",
    "decision_from_dict",
    "emit",
    "execute",
    "extract_display_items",
    "get_filesystem",
    "interrupt_from_dict",
    "merge_states",
    "messages_from_openai",
    "messages_to_openai",
    "new",
    "patch_dangling_tool_calls",
    "preprocess",
    "to_state",
    "tool",
]
