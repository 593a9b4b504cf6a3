"""Shared paths: the repository's fixtures, made by the real tools (see
fixtures/README.md)."""

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
