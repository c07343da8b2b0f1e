from __future__ import annotations

from django.urls import path

from sagents_django.agui.urls import urlpatterns as agui_urlpatterns
from sagents_django.sharing import urls as sharing_urls
from sagents_django.views import (
    actions,
    approvals,
    branches,
    chat,
    conversations,
    exports,
    files,
    health,
    inspector,
    preferences,
)

app_name = "sagents_django"

urlpatterns = [
    path("", conversations.home, name="home"),
    path("new/", conversations.new, name="new"),
    path("inbox/", approvals.inbox, name="inbox"),
    path("inbox/count/", approvals.inbox_count, name="inbox_count"),
    path("approvals/<str:token>/", approvals.link, name="approval_link"),
    path("usage/", actions.my_usage, name="my_usage"),
    path("usage/export/", exports.export, name="export"),
    path("usage/export/<uuid:export_id>/", exports.download, name="download_export"),
    path("c/<uuid:conversation_id>/", chat.conversation, name="conversation"),
    path("c/<uuid:conversation_id>/older/", chat.older, name="older"),
    path("c/<uuid:conversation_id>/send/", chat.send, name="send"),
    path("c/<uuid:conversation_id>/stop/", chat.stop, name="stop"),
    path("c/<uuid:conversation_id>/retry/", chat.retry, name="retry"),
    path("c/<uuid:conversation_id>/reset/", chat.reset, name="reset"),
    path(
        "c/<uuid:conversation_id>/m/<int:message_id>/rate/",
        actions.rate,
        name="rate",
    ),
    path(
        "c/<uuid:conversation_id>/m/<int:message_id>/regenerate/",
        branches.regenerate,
        name="regenerate",
    ),
    path(
        "c/<uuid:conversation_id>/m/<int:message_id>/edit/",
        branches.edit,
        name="edit",
    ),
    path(
        "c/<uuid:conversation_id>/m/<int:message_id>/switch/",
        branches.switch,
        name="switch_branch",
    ),
    path("c/<uuid:conversation_id>/fork/", actions.fork, name="fork"),
    path("c/<uuid:conversation_id>/decide/", approvals.decide, name="decide"),
    path("c/<uuid:conversation_id>/rename/", conversations.rename, name="rename"),
    path("c/<uuid:conversation_id>/delete/", conversations.delete, name="delete"),
    path("c/<uuid:conversation_id>/files/", files.panel, name="files"),
    path("c/<uuid:conversation_id>/files/open/", files.open_file, name="file"),
    path("c/<uuid:conversation_id>/files/download/", files.download, name="download"),
    path("c/<uuid:conversation_id>/files/upload/", files.upload, name="upload"),
    path("c/<uuid:conversation_id>/inspect/", inspector.inspector, name="inspector"),
    path("theme/", preferences.theme, name="theme"),
    path("ready/", health.ready, name="ready"),
    path("live/", health.live, name="live"),
    *agui_urlpatterns,
    *sharing_urls.urlpatterns,
]
