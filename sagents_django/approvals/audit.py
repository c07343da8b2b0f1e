"""The audit chain of approval requests, as rows an export writes.

One record per request: what was proposed (tool, call, argument hash, policy, who
asked, when, until when), each vote (who, when, which decision, edited arguments'
hash, reason, through which door), what was decided, which run carried it out, what
it did and its result. The admin's CSV and JSON exports and a user's data export
write these.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any

from .models import ApprovalRequest

CSV_COLUMNS = (
    "id",
    "created_at",
    "expires_at",
    "conversation",
    "requesting_run",
    "requested_by",
    "policy",
    "permission",
    "approvals_needed",
    "tool_name",
    "tool_call_id",
    "arguments_hash",
    "status",
    "votes",
    "decision",
    "decided_at",
    "executed_by_run",
    "execution_status",
    "executed_at",
    "result",
)


def _when(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def chain(row: ApprovalRequest) -> dict[str, Any]:
    """The request's chain proposed → decided → executed → result."""
    return {
        "id": str(row.pk),
        "proposed": {
            "created_at": _when(row.created_at),
            "expires_at": _when(row.expires_at),
            "conversation": row.conversation_ref,
            "requesting_run": row.run_ref,
            "requested_by": row.requested_by_label,
            "policy": row.policy,
            "permission": row.permission,
            "approvals_needed": row.approvals_needed,
            "tool_name": row.tool_name,
            "tool_call_id": row.tool_call_id,
            "arguments": row.arguments,
            "arguments_hash": row.arguments_hash,
        },
        "votes": [
            {
                "by": v.user_label,
                "at": _when(v.created_at),
                "decision": v.decision,
                "arguments_hash": v.arguments_hash,
                "reason": v.reason,
                "via": v.via,
            }
            for v in row.votes.all()
        ],
        "decided": {
            "status": row.status,
            "decision": row.decision,
            "decided_at": _when(row.decided_at),
        },
        "executed": {
            "run": row.resumed_run_ref,
            "status": row.execution_status,
            "executed_at": _when(row.executed_at),
            "result": row.result,
        },
    }


def as_json(rows: Iterable[ApprovalRequest]) -> str:
    return json.dumps([chain(r) for r in rows], indent=2, ensure_ascii=False)


def as_csv(rows: Iterable[ApprovalRequest]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        c = chain(row)
        p, d, e = c["proposed"], c["decided"], c["executed"]
        votes = "; ".join(
            f"{v['decision']} by {v['by'] or 'nobody'} at {v['at']} via {v['via']}"
            for v in c["votes"]
        )
        writer.writerow(
            [
                _cell(x)
                for x in (
                    c["id"],
                    p["created_at"],
                    p["expires_at"],
                    p["conversation"],
                    p["requesting_run"],
                    p["requested_by"],
                    p["policy"],
                    p["permission"],
                    p["approvals_needed"],
                    p["tool_name"],
                    p["tool_call_id"],
                    p["arguments_hash"],
                    d["status"],
                    votes,
                    json.dumps(d["decision"]) if d["decision"] is not None else "",
                    d["decided_at"],
                    e["run"],
                    e["status"],
                    e["executed_at"],
                    json.dumps(e["result"]) if e["result"] is not None else "",
                )
            ]
        )
    return out.getvalue()


def _cell(value: Any) -> str:
    """A CSV cell a spreadsheet will not run as a formula (CWE-1236)."""
    text = "" if value is None else str(value)
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
