"""Fixtures every gateway test shares: a project directory and the fake Bot API."""

from __future__ import annotations

import pytest

from tests.fakes.telegram_server import FakeTelegram


@pytest.fixture
def project(tmp_path):
    path = tmp_path / "proj"
    path.mkdir()
    return path


@pytest.fixture
def telegram():
    with FakeTelegram() as fake:
        yield fake
