"""The person's preferences the pages remember: the theme (``ui.theme``).

The switch posts here without JavaScript; with it, ``theme.js`` sets the same
cookie and the page changes at once.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from sagents_django.security import csp
from sagents_django.ui.theme import COOKIE, THEMES, chosen_theme

YEAR = 365 * 24 * 3600


@csp
@require_POST
def theme(request: HttpRequest) -> HttpResponse:
    """``theme=light|dark`` sets it, ``toggle`` switches from the current one,
    ``system`` forgets the choice; then back to ``next`` (this site only)."""
    wanted = request.POST.get("theme", "")
    if wanted == "toggle":
        wanted = "light" if chosen_theme(request) == "dark" else "dark"
    if wanted not in (*THEMES, "system"):
        return HttpResponse(
            "theme must be light, dark, toggle or system",
            status=400,
            content_type="text/plain",
        )
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        back = reverse("sagents_django:home")
    response = HttpResponseRedirect(back)
    if wanted == "system":
        response.delete_cookie(COOKIE, samesite="Lax")
    else:
        response.set_cookie(COOKIE, wanted, max_age=YEAR, samesite="Lax")
    return response
