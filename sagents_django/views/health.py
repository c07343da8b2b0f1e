"""Probes for load balancers and orchestrators: readiness and liveness.

Neither needs a user or a session, and neither says anything a stranger could use:
fixed words per check (``runtime.readiness``), no hosts, no URLs, no error text.
Both are async views, so a probe never waits for a thread a slow request holds.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from sagents_django.runtime import readiness


# csrf_exempt: they change nothing, and any other method must get its 405, not a
# 403 for a token it has no reason to carry.
@csrf_exempt
@never_cache
@require_safe
async def ready(request: HttpRequest) -> JsonResponse:
    """200 when this process can serve (database and channel layer reachable, not
    draining); 503 otherwise, naming the failed checks."""
    answer = await readiness.check()
    return JsonResponse(answer.to_dict(), status=200 if answer.ready else 503)


@csrf_exempt
@never_cache
@require_safe
async def live(request: HttpRequest) -> JsonResponse:
    """200 while the process answers requests at all (draining included: a
    draining process must be let finish, not restarted)."""
    return JsonResponse({"alive": True})
