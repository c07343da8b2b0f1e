"""The project's Celery app.

The reusable app only declares ``shared_task``s; the app object lives here, in the
project. Settings are chosen together with the run lease (DESIGN.md, "Reliability"):
a task is acknowledged only after it finishes, a worker takes one task at a time, and
only JSON crosses the broker.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    accept_content=["json"],
    task_serializer="json",
    result_serializer="json",
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
)
app.autodiscover_tasks()
