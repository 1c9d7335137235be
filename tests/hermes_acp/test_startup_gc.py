"""The collector pauses while hermes-acp starts and resumes, with what was loaded frozen."""

from __future__ import annotations

import gc
import time

from hermes_acp import startup_gc


def _restore() -> None:
    startup_gc.resume()
    gc.unfreeze()
    gc.enable()


def test_paused_until_resumed_then_loaded_objects_are_frozen() -> None:
    gc.unfreeze()
    try:
        startup_gc.pause()
        assert not gc.isenabled()
        loaded = [object() for _ in range(1000)]
        startup_gc.resume()
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(loaded)
        startup_gc.resume()  # a second answer changes nothing
        assert gc.isenabled()
    finally:
        _restore()


def test_resumes_by_itself_when_no_prompt_comes() -> None:
    try:
        startup_gc.pause(limit=0.05)
        assert not gc.isenabled()
        deadline = time.monotonic() + 10
        while not gc.isenabled() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gc.isenabled()
    finally:
        _restore()


def test_a_collector_turned_off_by_the_embedder_stays_off() -> None:
    gc.disable()
    try:
        startup_gc.pause()
        startup_gc.resume()
        assert not gc.isenabled()
    finally:
        _restore()
