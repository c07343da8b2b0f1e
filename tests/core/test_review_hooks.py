"""Approval policies as ordinary middleware: ``review_tool_calls`` decides which calls
wait for a person, ``review_decisions`` receives the decisions on the requests its
middleware raised. Site policies (a spending limit, trust for staff, staff-only
approvals) are written here without touching the loop."""

from __future__ import annotations

from typing import Any

import pytest

from sagents_django.core import (
    ActionRequest,
    Agent,
    Approve,
    Edit,
    HITLInterrupt,
    HumanInTheLoop,
    Interrupt,
    InvalidResume,
    Message,
    Middleware,
    Reject,
    Resume,
    State,
    StateSerializer,
    Tool,
    ToolCall,
)
from sagents_django.core.testing import ScriptedModel

AMOUNT = {
    "type": "object",
    "properties": {"amount": {"type": "number"}},
    "required": ["amount"],
}


class Shop:
    """Tools that record what actually ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict]] = []

    def tool(self, name: str, parameters: dict | None = None) -> Tool:
        def run(args: dict, _ctx: object) -> str:
            self.ran.append((name, dict(args)))
            return f"{name} done"

        return Tool(
            name=name,
            description=name,
            function=run,
            parameters=parameters or {"type": "object", "properties": {}},
        )

    def tools(self) -> list[Tool]:
        return [
            self.tool("purchase", AMOUNT),
            self.tool("delete_account"),
            self.tool("write_file"),
            self.tool("lookup"),
        ]


class SpendingLimit(Middleware):
    """Purchases under the limit go through; larger ones wait for a person."""

    def __init__(self, *, limit: float = 100) -> None:
        super().__init__(limit=limit)
        self.limit = limit
        self.asked: list[list[str]] = []

    def review_tool_calls(self, state, calls, context):
        self.asked.append([c.call_id for c in calls])
        return [
            ActionRequest.for_call(
                c,
                description=f"Spend {c.arguments['amount']}",
                allowed_decisions=["approve", "edit", "reject"],
            )
            for c in calls
            if c.name == "purchase" and c.arguments["amount"] >= self.limit
        ]


class StaffApprovesSpending(SpendingLimit):
    """...and only staff may approve them, at most ``cap`` at a time."""

    def __init__(self, *, limit: float = 100, cap: float = 500) -> None:
        super().__init__(limit=limit)
        self.cap = cap
        self.routed: list[tuple[list[str], list[Any]]] = []

    async def review_decisions(self, state, requests, decisions, context):
        self.routed.append(([r.tool_call_id for r in requests], list(decisions)))
        if not context.tool_context.get("is_staff") and any(
            not isinstance(d, Reject) for d in decisions
        ):
            raise InvalidResume("Only staff may approve purchases over the limit")
        return [
            Edit(arguments={"amount": self.cap})
            if isinstance(d, Approve) and r.arguments["amount"] > self.cap
            else d
            for r, d in zip(requests, decisions, strict=True)
        ]


class TrustStaff(Middleware):
    """Staff delete accounts directly; anyone else waits for a person (async hook)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[list[str]] = []

    async def review_tool_calls(self, state, calls, context):
        self.asked.append([c.call_id for c in calls])
        if context.tool_context.get("is_staff"):
            return None
        return [ActionRequest.for_call(c) for c in calls if c.name == "delete_account"]


def calls(*specs: tuple[str, dict, str]) -> Message:
    return Message.assistant(
        tool_calls=[ToolCall(call_id=i, name=n, arguments=a) for n, a, i in specs]
    )


def build(shop: Shop, replies: list, middleware: list, **options: Any):
    model = ScriptedModel(replies)
    agent = Agent(
        replace_default_middleware=True,
        model=model,
        tools=shop.tools(),
        middleware=middleware,
        **options,
    )
    return agent, model


@pytest.fixture
def shop() -> Shop:
    return Shop()


# review_tool_calls ------------------------------------------------------------------
async def test_a_purchase_under_the_limit_runs_without_a_person(shop):
    agent, _ = build(
        shop, [calls(("purchase", {"amount": 20}, "p1")), "Bought."], [SpendingLimit]
    )

    result = await agent.aexecute(["Buy the small one"])

    assert result.status == "completed", result.error
    assert shop.ran == [("purchase", {"amount": 20})]
    assert not any(isinstance(e.middleware, HumanInTheLoop) for e in agent.middleware)


async def test_a_purchase_over_the_limit_waits_with_the_policys_request(shop):
    agent, model = build(
        shop,
        [calls(("purchase", {"amount": 250}, "p1")), "Bought."],
        [(SpendingLimit, {"id": "spending"})],
    )

    result = await agent.aexecute(["Buy the big one"])

    assert result.status == "interrupted"
    assert shop.ran == []
    assert result.interrupt == HITLInterrupt(
        action_requests=[
            ActionRequest(
                tool_call_id="p1",
                tool_name="purchase",
                arguments={"amount": 250},
                description="Spend 250",
                middleware_id="spending",
                parameters=AMOUNT,  # stamped by the loop: the tool's schema
            )
        ]
    )
    final = await agent.aresume(result.state, [Approve()])
    assert final.status == "completed", final.error
    assert shop.ran == [("purchase", {"amount": 250})]
    assert len(model.requests) == 2


async def test_in_a_batch_only_the_large_purchase_waits_and_both_run_after(shop):
    agent, _ = build(
        shop,
        [
            calls(
                ("purchase", {"amount": 5}, "small"),
                ("purchase", {"amount": 900}, "big"),
            ),
            "Done.",
        ],
        [SpendingLimit],
    )

    result = await agent.aexecute(["Buy both"])
    assert result.interrupt.tool_call_ids == ["big"]
    assert shop.ran == []

    final = await agent.aresume(result.state, [{"type": "approve"}])

    assert final.status == "completed", final.error
    assert sorted(a["amount"] for _, a in shop.ran) == [5, 900]


@pytest.mark.parametrize(("is_staff", "paused"), [(True, False), (False, True)])
async def test_staff_are_trusted_and_others_wait(shop, is_staff, paused):
    agent, _ = build(
        shop,
        [calls(("delete_account", {}, "d1")), "Deleted."],
        [TrustStaff],
        tool_context={"is_staff": is_staff},
    )

    result = await agent.aexecute(["Delete my account"])

    assert (result.status == "interrupted") is paused
    assert shop.ran == ([] if paused else [("delete_account", {})])


async def test_every_policy_asks_about_its_calls_in_one_interrupt_in_call_order(shop):
    limit, trust = SpendingLimit(), TrustStaff()
    agent, _ = build(
        shop,
        [
            calls(
                ("write_file", {}, "w1"),
                ("lookup", {}, "l1"),
                ("purchase", {"amount": 300}, "p1"),
                ("delete_account", {}, "d1"),
            ),
            "All done.",
        ],
        [limit, trust],
        interrupt_on={"write_file": {"allowed_decisions": ["approve", "reject"]}},
    )

    result = await agent.aexecute(["Do everything"])

    requests = result.interrupt.action_requests
    assert [(r.tool_call_id, r.middleware_id) for r in requests] == [
        ("w1", "sagents_django.core.middleware.human_in_the_loop.HumanInTheLoop"),
        ("p1", f"{__name__}.SpendingLimit"),
        ("d1", f"{__name__}.TrustStaff"),
    ]
    assert requests[0].allowed_decisions == ("approve", "reject")
    # In stack order (interrupt_on's HumanInTheLoop comes last), each middleware is
    # asked only about the calls no earlier one claimed.
    assert limit.asked == [["w1", "l1", "p1", "d1"]]
    assert trust.asked == [["w1", "l1", "d1"]]

    final = await agent.aresume(
        result.state, [Reject(), Edit(arguments={"amount": 30}), Approve()]
    )

    assert final.status == "completed", final.error
    assert sorted(shop.ran) == [
        ("delete_account", {}),
        ("lookup", {}),
        ("purchase", {"amount": 30}),
    ]


# review_decisions ---------------------------------------------------------------------
async def test_decisions_go_to_the_middleware_that_asked_and_it_may_change_them(shop):
    policy = StaffApprovesSpending(cap=500)
    customer, _ = build(
        shop,
        [calls(("delete_account", {}, "d1"), ("purchase", {"amount": 2000}, "p1"))],
        [policy, TrustStaff],
    )
    paused = await customer.aexecute(["Delete and buy"])
    assert paused.interrupt.tool_call_ids == ["d1", "p1"]

    # A member of staff decides: the agent is rebuilt with their tool_context.
    staff, _ = build(
        shop, ["Done."], [policy, TrustStaff], tool_context={"is_staff": True}
    )
    final = await staff.aresume(paused.state, [Approve(), Approve()])

    assert final.status == "completed", final.error
    # Only the purchase was routed to the spending policy, which capped it.
    assert policy.routed == [(["p1"], [Approve()])]
    assert sorted(shop.ran) == [("delete_account", {}), ("purchase", {"amount": 500})]
    assert final.state.messages[1].tool_calls[1].arguments == {"amount": 500}


async def test_a_policy_that_refuses_the_decisions_changes_nothing(shop):
    policy = StaffApprovesSpending()
    agent, model = build(
        shop, [calls(("purchase", {"amount": 300}, "p1")), "Bought."], [policy]
    )
    paused = await agent.aexecute(["Buy"])
    before = StateSerializer.serialize_state(paused.state)

    with pytest.raises(InvalidResume, match="Only staff may approve"):
        await agent.aresume(paused.state, [Approve()])

    assert StateSerializer.serialize_state(paused.state) == before
    assert shop.ran == [] and len(model.requests) == 1
    # A rejection is anyone's to make.
    final = await agent.aresume(paused.state, [Reject(message="Too much.")])
    assert final.status == "completed", final.error
    assert "Too much." in final.state.messages[2].tool_results[0].content


# Hooks that misbehave ------------------------------------------------------------------
class Raises(Middleware):
    def review_tool_calls(self, state, calls, context):
        raise RuntimeError("policy service down")


class Foreign(Middleware):
    def review_tool_calls(self, state, calls, context):
        return [ActionRequest(tool_call_id="nope", tool_name="lookup")]


class NotAList(Middleware):
    def review_tool_calls(self, state, calls, context):
        return ActionRequest.for_call(calls[0])


@pytest.mark.parametrize(
    ("middleware", "problem"),
    [
        (Raises, "failed in review_tool_calls: policy service down"),
        (Foreign, "asked about call 'nope', which is not one of the calls"),
        (NotAList, "returned ActionRequest, not a list"),
    ],
)
async def test_a_review_hook_that_misbehaves_ends_the_turn_and_nothing_runs(
    shop, middleware, problem
):
    agent, _ = build(shop, [calls(("lookup", {}, "l1"))], [middleware])

    result = await agent.aexecute(["Look it up"])

    assert result.status == "error"
    assert problem in result.error
    assert shop.ran == []
    assert result.state.interrupt_data is None


async def test_a_review_decisions_hook_returning_the_wrong_count_ends_the_turn(shop):
    class Forgets(SpendingLimit):
        def review_decisions(self, state, requests, decisions, context):
            return []

    agent, _ = build(shop, [calls(("purchase", {"amount": 300}, "p1"))], [Forgets])
    paused = await agent.aexecute(["Buy"])

    result = await agent.aresume(paused.state, [Approve()])

    assert result.status == "error"
    assert "failed in review_decisions" in result.error
    assert result.state.interrupt_data == paused.interrupt_data
    assert shop.ran == []


# HumanInTheLoop is one policy among others -------------------------------------------
async def test_interrupt_on_can_describe_a_tool_for_the_person(shop):
    agent, _ = build(
        shop,
        [calls(("write_file", {}, "w1"))],
        [],
        interrupt_on={
            "write_file": {
                "allowed_decisions": ["approve", "reject"],
                "description": "Writes to the shared drive",
            }
        },
    )

    result = await agent.aexecute(["Write"])

    [request] = result.interrupt.action_requests
    assert request.description == "Writes to the shared drive"
    assert request.allowed_decisions == ("approve", "reject")


async def test_a_human_in_the_loop_subclass_can_skip_approval_for_staff(shop):
    class StaffSkipApproval(HumanInTheLoop):
        def review_tool_calls(self, state, calls, context):
            if context.tool_context.get("is_staff"):
                return None
            return super().review_tool_calls(state, calls, context)

    spec = (StaffSkipApproval, {"interrupt_on": {"write_file": True}})
    staff, _ = build(
        shop,
        [calls(("write_file", {}, "w1")), "ok"],
        [spec],
        tool_context={"is_staff": True},
    )
    guest, _ = build(shop, [calls(("write_file", {}, "w1"))], [spec])

    assert (await staff.aexecute(["Write"])).status == "completed"
    assert (await guest.aexecute(["Write"])).status == "interrupted"
    assert shop.ran == [("write_file", {})]


async def test_an_after_model_hook_may_raise_a_typed_hitl_interrupt(shop):
    class AskAboutEverything(Middleware):
        def after_model(self, state: State) -> State | Interrupt:
            last = state.messages[-1]
            if not last.tool_calls:
                return state
            requests = [ActionRequest.for_call(c) for c in last.tool_calls]
            return Interrupt(state=state, data=HITLInterrupt(action_requests=requests))

    agent, _ = build(
        shop, [calls(("lookup", {}, "l1")), "Found."], [AskAboutEverything]
    )

    paused = await agent.aexecute(["Look"])
    assert paused.interrupt_data["type"] == "hitl"
    final = await agent.aresume(paused.state, [{"type": "edit", "arguments": {}}])

    assert final.status == "completed", final.error
    assert shop.ran == [("lookup", {})]


async def test_a_custom_resume_may_hand_back_decisions_as_json(shop):
    class AskFirst(Middleware):
        def after_model(self, state: State) -> State | Interrupt:
            if state.messages[-1].tool_calls:
                return Interrupt(state=state, data={"type": "ask"})
            return state

        def handle_resume(self, agent, state, resume_data, **options):
            if (state.interrupt_data or {}).get("type") != "ask":
                return None
            kind = "approve" if resume_data == "yes" else "reject"
            call_id = state.messages[-1].tool_calls[0].call_id
            return Resume(
                state=State(messages=state.messages),
                tool_decisions={call_id: {"type": kind}},
            )

    agent, _ = build(shop, [calls(("lookup", {}, "l1")), "ok"], [AskFirst])
    paused = await agent.aexecute(["Look"])

    final = await agent.aresume(paused.state, "no")

    assert final.status == "completed", final.error
    assert shop.ran == []
    assert final.state.messages[2].tool_results[0].is_error
