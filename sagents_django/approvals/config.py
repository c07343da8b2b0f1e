"""``SAGENTS["APPROVALS"]``: who decides an approval request, how many must, and
how long it waits.

Read through ``sagents_settings.APPROVALS`` (validated here, once; the system
check reports the same sentence)::

    SAGENTS = {"APPROVALS": {
        # Who may decide, as Django permissions: by tool name, by policy (the id of
        # the middleware that asked, "policy:<id>"), or "*" for every request.
        # A tool's own ``interrupt_on`` entry may name one too ("permission").
        "PERMISSIONS": {"delete_records": "shop.approve_deletions"},
        # Whether the conversation's owner may decide their own requests.
        "OWNER_DECIDES": True,
        # Tools that need QUORUM distinct approvers (the requester at most first).
        "HIGH_RISK": ["delete_records"],
        "QUORUM": 2,
        # Seconds a request waits before the sweeper applies ON_EXPIRY (None: never).
        "EXPIRES_AFTER": 86400,
        "ON_EXPIRY": "reject",  # or "dismiss"
        # The tenancy of permission holders: None (a site whose conversations
        # belong to users is one tenant; otherwise a decider's own scope), or the
        # dotted path of a function (user, conversations) -> conversations.
        "TENANCY": None,
    }}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Expiry = Literal["reject", "dismiss"]
EXPIRY_OUTCOMES: Final[tuple[Expiry, ...]] = ("reject", "dismiss")
MAX_QUORUM: Final = 10
PERMISSION = re.compile(r"^[A-Za-z_][\w]*\.[\w.-]+$")
DOTTED = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+$")
KEYS: Final = frozenset(
    {
        "PERMISSIONS",
        "OWNER_DECIDES",
        "HIGH_RISK",
        "QUORUM",
        "EXPIRES_AFTER",
        "ON_EXPIRY",
        "TENANCY",
    }
)


@dataclass(frozen=True, kw_only=True)
class ApprovalSettings:
    permissions: Mapping[str, str] = field(default_factory=dict)
    """Permission by tool name, ``policy:<middleware id>`` or ``*``."""
    owner_decides: bool = True
    high_risk: frozenset[str] = frozenset()
    quorum: int = 2
    expires_after: int | None = 86400
    on_expiry: Expiry = "reject"
    tenancy: str | None = None

    def permission_for(self, tool_name: str, policy: str) -> str:
        """The permission that lets a person decide this request ("" : none)."""
        for key in (tool_name, f"policy:{policy}", "*"):
            if key in self.permissions:
                return self.permissions[key]
        return ""

    def approvers_for(self, tool_name: str) -> int:
        return self.quorum if tool_name in self.high_risk else 1


def problem(value: Any) -> str | None:
    """What is wrong with the APPROVALS setting, as the end of a sentence that
    quotes the value."""
    why = _why(value)
    return None if why is None else f"{why}, not {value!r}"


def _why(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return "must be a dict"
    unknown = sorted(set(value) - KEYS)
    if unknown:
        return f"has unknown keys {unknown!r} (known: {sorted(KEYS)!r})"
    permissions = value.get("PERMISSIONS", {})
    if not isinstance(permissions, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and PERMISSION.match(v)
        for k, v in permissions.items()
    ):
        return (
            "['PERMISSIONS'] must map tool names (or 'policy:<id>', '*') to "
            "'app_label.codename' permissions"
        )
    if not isinstance(value.get("OWNER_DECIDES", True), bool):
        return "['OWNER_DECIDES'] must be True or False"
    risky = value.get("HIGH_RISK", [])
    if not isinstance(risky, list | tuple) or not all(
        isinstance(t, str) for t in risky
    ):
        return "['HIGH_RISK'] must be a list of tool names"
    quorum = value.get("QUORUM", 2)
    if type(quorum) is not int or not 2 <= quorum <= MAX_QUORUM:
        return f"['QUORUM'] must be an integer from 2 to {MAX_QUORUM}"
    expires = value.get("EXPIRES_AFTER", 86400)
    if expires is not None and (type(expires) is not int or expires <= 0):
        return "['EXPIRES_AFTER'] must be a positive number of seconds or None"
    if value.get("ON_EXPIRY", "reject") not in EXPIRY_OUTCOMES:
        return f"['ON_EXPIRY'] must be one of {EXPIRY_OUTCOMES!r}"
    tenancy = value.get("TENANCY")
    if tenancy is not None and not (isinstance(tenancy, str) and DOTTED.match(tenancy)):
        return (
            "['TENANCY'] must be None or the dotted path of a function "
            "(user, conversations) -> conversations"
        )
    return None


def read(value: Mapping[str, Any]) -> ApprovalSettings:
    """The settings of a value ``problem`` accepted."""
    return ApprovalSettings(
        permissions=dict(value.get("PERMISSIONS", {})),
        owner_decides=value.get("OWNER_DECIDES", True),
        high_risk=frozenset(value.get("HIGH_RISK", ())),
        quorum=value.get("QUORUM", 2),
        expires_after=value.get("EXPIRES_AFTER", 86400),
        on_expiry=value.get("ON_EXPIRY", "reject"),
        tenancy=value.get("TENANCY"),
    )
