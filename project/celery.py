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
    # A broker that goes away never ends a turn: the worker keeps running it and waits
    # for the broker however long it is down (not 100 tries), and the run's lease, not
    # the message, says who runs the turn. Celery 6 would cancel such tasks by default.
    broker_connection_max_retries=None,
    worker_cancel_long_running_tasks_on_connection_loss=False,
)
app.autodiscover_tasks()
