"""A worker's heap is settled (collected, then frozen) after its start-up and after
its first turn, once each (``runtime.heap``)."""

from __future__ import annotations

import threading

import pytest

from sagents_django.runtime import heap


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reasons: list[str] = []
    monkeypatch.setattr(heap, "_first_turn_settled", False)
    monkeypatch.setattr(heap.gc, "freeze", lambda: reasons.append("frozen"))
    return reasons


def test_the_first_turn_settles_the_heap_and_later_ones_do_not(
    settled: list[str],
) -> None:
    heap.first_turn_done()
    heap.first_turn_done()

    assert settled == ["frozen"]


def test_start_up_settles_once_its_warm_up_thread_is_done(
    settled: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    go, done = threading.Event(), threading.Event()
    warm_up = threading.Thread(target=go.wait)
    warm_up.start()
    settle = heap.settle

    def settle_then_tell(reason: str) -> None:
        settle(reason)
        done.set()

    monkeypatch.setattr(heap, "settle", settle_then_tell)
    heap.settle_after(warm_up, "start-up")
    assert not done.wait(0.2)  # the warm-up is still importing
    assert settled == []
    go.set()

    assert done.wait(10)
    assert settled == ["frozen"]
