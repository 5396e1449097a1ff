"""Ops the layers of tw.nn and the model zoo need beyond the other families."""

from __future__ import annotations

CASES: list = []
