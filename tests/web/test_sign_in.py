"""Signing in and out with the app's own pages, as the README's steps mount them
(``tests.readme_urls``: the chat pages under agents/, django.contrib.auth's views
under accounts/) in a site with no templates of its own."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import Client, override_settings

from sagents_django import services
from sagents_django.scope import Scope

pytestmark = pytest.mark.django_db

APP_TEMPLATES_ONLY = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
            ]
        },
    }
]
README_APPS = [
    "sagents_django",
    *(a for a in settings.INSTALLED_APPS if a != "sagents_django"),
]
"""The README's order: the app before django.contrib.admin, whose own
registration/logged_out.html would otherwise be found first."""


@pytest.fixture(autouse=True)
def readme_site() -> Iterator[None]:
    with override_settings(
        ROOT_URLCONF="tests.readme_urls",
        TEMPLATES=APP_TEMPLATES_ONLY,
        INSTALLED_APPS=README_APPS,
        LOGIN_URL="/accounts/login/",
        LOGIN_REDIRECT_URL="sagents_django:home",
        LOGOUT_REDIRECT_URL=None,
    ):
        yield


def no_inline_script_or_style(html: str) -> bool:
    return not re.search(r"<script(?![^>]*\bsrc=)|<style|\sstyle=|\son\w+=", html)


def test_signed_out_the_chat_offers_a_sign_in_link_that_comes_back(
    client: Client,
) -> None:
    html = client.get("/agents/").content.decode()

    assert 'href="/accounts/login/?next=/agents/"' in html
    assert "Sign in</a> to chat with the agent" in html


def test_the_sign_in_page_is_the_apps_in_its_layout_with_no_inline_code(
    client: Client,
) -> None:
    response = client.get("/accounts/login/?next=/agents/")
    html = response.content.decode()

    assert response.status_code == 200
    assert "sagents_django/base.css" in html and 'class="sg-auth"' in html
    assert '<label for="id_username">Username</label>' in html
    assert '<input type="hidden" name="next" value="/agents/">' in html
    assert no_inline_script_or_style(html)


def test_signing_in_lands_on_the_conversations_of_the_user(
    client: Client, alice: Any
) -> None:
    services.create_conversation(Scope.for_user(alice), title="First steps")

    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "pw"}, follow=True
    )

    assert response.redirect_chain == [("/agents/", 302)]
    assert "First steps" in response.content.decode()


def test_a_wrong_password_is_said_on_the_page(client: Client, alice: Any) -> None:
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "nope"}
    )

    assert response.status_code == 200
    assert "enter a correct username and password" in response.content.decode()


def test_signing_out_is_a_post_that_shows_the_apps_signed_out_page(
    alice_client: Client,
) -> None:
    page = alice_client.get("/agents/").content.decode()
    assert 'action="/accounts/logout/"' in page and 'method="post"' in page

    assert alice_client.get("/accounts/logout/").status_code == 405  # Django 5
    response = alice_client.post("/accounts/logout/")
    html = response.content.decode()

    assert response.status_code == 200
    assert "<h1>Signed out</h1>" in html
    assert 'href="/accounts/login/?next=/agents/"' in html
    assert no_inline_script_or_style(html)
    assert alice_client.get("/agents/inbox/")["Location"].startswith("/accounts/login/")


def test_with_no_sign_in_view_the_landing_page_says_how_to_add_one(
    client: Client,
) -> None:
    with override_settings(ROOT_URLCONF="tests.app_only_urls"):
        html = client.get("/").content.decode()

    assert "/accounts/login/" not in html
    assert 'include("django.contrib.auth.urls")' in html


def test_a_sign_in_page_on_another_site_is_linked_as_it_is(client: Client) -> None:
    with override_settings(LOGIN_URL="https://sso.example.com/login"):
        html = client.get("/agents/").content.decode()

    assert 'href="https://sso.example.com/login?next=/agents/"' in html


def test_the_header_sign_in_link_comes_back_to_a_chat_page_never_to_sign_out(
    client: Client, alice_client: Client
) -> None:
    inbox = client.get("/agents/inbox/", follow=True).content.decode()
    signed_out = alice_client.post("/accounts/logout/").content.decode()

    # The sign-in page: the theme switch, and no link to itself.
    assert "sg-theme-form" in inbox and ">Sign in</a>" not in inbox
    assert '<nav aria-label="Account">' in signed_out
    assert 'href="/accounts/login/?next=/agents/">Sign in</a>' in signed_out
