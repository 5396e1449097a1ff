"""The complete rule table: ``_rules`` holds the table and the element-wise, reduction and matmul
rules; importing the other families (``_rules_layers``, ``_rules_shape``) registers theirs into it.
Import the table from here, not from ``_rules``, so that every rule is in it (and no family imports
another in a cycle)."""

from __future__ import annotations

from . import _rules_layers, _rules_shape  # noqa: F401 - each registers its rules on import
from ._rules import RULES

TABLE = RULES.summary

__all__ = ["RULES", "TABLE"]
