from __future__ import annotations

from django.urls import path

from sagents_django import views

app_name = "sagents_django"

urlpatterns = [
    path("", views.home, name="home"),
]
