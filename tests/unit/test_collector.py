"""While an engine is open the collector runs rarely; the last one to close restores the settings."""

from __future__ import annotations

import gc

from agent_fleet.collector import ENGINE_THRESHOLDS, tuned_collector


def test_thresholds_are_raised_while_open_and_restored_by_the_last_to_close() -> None:
    before = gc.get_threshold()
    assert before != ENGINE_THRESHOLDS
    frozen_before = gc.get_freeze_count()
    with tuned_collector():
        assert gc.get_threshold() == ENGINE_THRESHOLDS
        assert gc.get_freeze_count() > frozen_before  # the heap at the start is out of the collector's view
        with tuned_collector():
            assert gc.get_threshold() == ENGINE_THRESHOLDS
        assert gc.get_threshold() == ENGINE_THRESHOLDS  # the outer engine still runs
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_settings_come_back_after_an_error() -> None:
    before = gc.get_threshold()
    try:
        with tuned_collector():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before
