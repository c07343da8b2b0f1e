"""The sharing routes, part of the app's ``urls`` (namespace ``sagents_django``)."""

from __future__ import annotations

from django.urls import path

from . import file_views, views

urlpatterns = [
    path("c/<uuid:conversation_id>/share/", views.add_share, name="share"),
    path(
        "c/<uuid:conversation_id>/share/<int:share_id>/revoke/",
        views.remove_share,
        name="revoke_share",
    ),
    path("c/<uuid:conversation_id>/links/", views.add_link, name="share_link"),
    path(
        "c/<uuid:conversation_id>/links/<uuid:link_id>/revoke/",
        views.remove_link,
        name="revoke_link",
    ),
    path("s/<str:token>/", views.shared_link, name="shared_link"),
    path("files/<int:filesystem_id>/", file_views.shared_files, name="shared_files"),
]
