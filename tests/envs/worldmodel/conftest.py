"""The world-model fixtures live in tests/_worldmodel_fixtures.py (shared with the registry-wide tests)."""

from __future__ import annotations

from tests._worldmodel_fixtures import TEMPLATES, TEST_IDS, TRAIN_IDS

__all__ = ["TEMPLATES", "TEST_IDS", "TRAIN_IDS"]
