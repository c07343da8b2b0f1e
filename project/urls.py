"""The project's URLs: the admin, sign-in/out and the sagents_django app."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from sagents_django.security import csp

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", csp(auth_views.LoginView.as_view()), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("sagents_django.urls")),
]
