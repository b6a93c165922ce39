"""While an engine is open the collector runs rarely and the GIL changes hands sooner; the last
engine to close restores the settings."""

from __future__ import annotations

import gc
import sys

from agent_fleet.runtime import ENGINE_GC_THRESHOLDS, ENGINE_SWITCH_INTERVAL, tuned_runtime


def test_settings_hold_while_open_and_the_last_to_close_restores_them() -> None:
    thresholds, interval = gc.get_threshold(), sys.getswitchinterval()
    assert thresholds != ENGINE_GC_THRESHOLDS and interval != ENGINE_SWITCH_INTERVAL
    frozen_before = gc.get_freeze_count()
    with tuned_runtime():
        assert gc.get_threshold() == ENGINE_GC_THRESHOLDS
        assert sys.getswitchinterval() == ENGINE_SWITCH_INTERVAL
        assert gc.get_freeze_count() > frozen_before  # the heap at the start is out of the collector's view
        with tuned_runtime():
            assert gc.get_threshold() == ENGINE_GC_THRESHOLDS
        assert gc.get_threshold() == ENGINE_GC_THRESHOLDS  # the outer engine still runs
        assert sys.getswitchinterval() == ENGINE_SWITCH_INTERVAL
    assert gc.get_threshold() == thresholds and sys.getswitchinterval() == interval
    assert gc.get_freeze_count() == 0


def test_settings_come_back_after_an_error() -> None:
    thresholds, interval = gc.get_threshold(), sys.getswitchinterval()
    try:
        with tuned_runtime():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert gc.get_threshold() == thresholds and sys.getswitchinterval() == interval
