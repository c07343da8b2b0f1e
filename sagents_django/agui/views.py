"""The AG-UI HTTP endpoints: a run (``RunAgentInput`` in, events out as SSE), a
reconnect to a conversation's stream, the capabilities, a new thread.

Thin, as every entry point here: read the request, authorize through the caller's
scope, call the runtime's verbs, hand the stream to ``stream.stream``. Errors are
JSON ``{"error": {"code", "message"}}`` with the status that says what went wrong
(docs/agui.md lists them); another user's thread is the same 404 as none.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt

from sagents_django import services
from sagents_django.core.exceptions import SagentsError
from sagents_django.exceptions import Conflict, InvalidInput, NotFound
from sagents_django.runtime import layer
from sagents_django.runtime.database import db
from sagents_django.scope import Scope, scope_class
from sagents_django.sharing.access import scope_for

from . import capabilities, inputs, runs, sse, tokens
from .stream import Join, stream
from .translate import Translator


class Refused(Exception):
    """A request answered with an error status (nothing was changed)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


@csrf_exempt
async def run(request: HttpRequest) -> HttpResponseBase:
    """``POST``: a ``RunAgentInput``; the run's events as SSE."""
    if request.method != "POST":
        return _error(405, "method_not_allowed", "POST a RunAgentInput")
    try:
        scope = await _scope(request, post=True)
        run_input = inputs.parse(_body(request))
        join = await db(runs.start)(scope, run_input)
    except Refused as exc:
        return _error(exc.status, exc.code, exc.message)
    except inputs.Rejected as exc:
        return _error(exc.status, exc.code, str(exc))
    except NotFound:
        return _error(404, "not_found", "No such thread")
    except Conflict as exc:
        return _error(409, "conflict", str(exc))
    except (InvalidInput, SagentsError) as exc:
        return _error(422, "invalid_input", str(exc))
    return _sse(stream(join))


@csrf_exempt
async def connect(request: HttpRequest, thread_id: Any) -> HttpResponseBase:
    """``GET``: join the thread's stream (a reconnect sends ``Last-Event-ID``)."""
    if request.method != "GET":
        return _error(405, "method_not_allowed", "GET the thread's stream")
    last = request.headers.get("Last-Event-ID") or request.GET.get("lastEventId")
    try:
        scope = await _scope(request, post=False)
        last_seq = _seq(last)
        scope = await db(scope_for)(scope, thread_id, access="read")
        conversation = await db(services.get_conversation)(scope, thread_id)
        if conversation is None:
            raise NotFound("thread")
    except Refused as exc:
        return _error(exc.status, exc.code, exc.message)
    except NotFound:
        return _error(404, "not_found", "No such thread")
    run_id = request.GET.get("runId") or ""
    if len(run_id) > inputs.MAX_ID_CHARS:
        return _error(422, "invalid_input", "runId is too long")
    translator = Translator(
        thread_id=str(conversation.pk), run_id=run_id or f"{conversation.pk}.join"
    )
    join = Join(
        scope=scope,
        conversation=conversation,
        translator=translator,
        last_event_id=last_seq,
    )
    return _sse(stream(join))


async def agent_capabilities(request: HttpRequest) -> HttpResponse:
    """``GET``: AG-UI ``AgentCapabilities`` (``resumable``: the extension)."""
    return JsonResponse(capabilities.CAPABILITIES)


@csrf_exempt
async def new_thread(request: HttpRequest) -> HttpResponse:
    """``POST``: a new conversation of the caller's; ``{"threadId"}``."""
    if request.method != "POST":
        return _error(405, "method_not_allowed", "POST to create a thread")
    try:
        scope = await _scope(request, post=True)
    except Refused as exc:
        return _error(exc.status, exc.code, exc.message)
    conversation = await db(services.create_conversation)(scope)
    return JsonResponse({"threadId": str(conversation.pk)}, status=201)


# Helpers -------------------------------------------------------------------------------
async def _scope(request: HttpRequest, *, post: bool) -> Scope:
    if layer.get_layer() is None:
        # Nothing could reach the stream (check W002 says so at start-up).
        raise Refused(503, "no_channel_layer", "Live events need CHANNEL_LAYERS")
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        user = await db(tokens.user_for)(header[7:].strip())
        if user is None:
            raise Refused(401, "unauthenticated", "The bearer token is not valid")
    else:
        user = await request.auser()
        if not user.is_authenticated:
            raise Refused(401, "unauthenticated", "Sign in, or send a bearer token")
        if post and _csrf_refused(request):
            raise Refused(403, "csrf", "A session's POST needs Django's CSRF token")
    result: Scope = await db(scope_class().for_user)(user)
    return result


def _csrf_refused(request: HttpRequest) -> bool:
    # A session cookie rides along with any cross-site request; a bearer token does
    # not, which is why only the session's requests are checked.
    check = CsrfViewMiddleware(lambda r: HttpResponse())
    return check.process_view(request, lambda r: HttpResponse(), (), {}) is not None


def _body(request: HttpRequest) -> bytes:
    length = request.META.get("CONTENT_LENGTH") or "0"
    if not length.isdigit() or int(length) > inputs.MAX_INPUT_BYTES:
        raise Refused(
            413, "too_large", f"The body is over {inputs.MAX_INPUT_BYTES} bytes"
        )
    try:
        return request.body
    except RequestDataTooBig:  # the site's DATA_UPLOAD_MAX_MEMORY_SIZE is lower
        raise Refused(413, "too_large", "The body is over the site's limit") from None


def _seq(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    if not value.isdigit() or len(value) > 18:
        raise Refused(422, "invalid_input", f"Last-Event-ID {value[:40]!r} is not ours")
    return int(value)


def _sse(batches: AsyncIterator[Any]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(sse.encode(batches), content_type=sse.MEDIA_TYPE)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response
