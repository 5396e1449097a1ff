"""The complete rule table: ``_rules`` holds the table and the element-wise, matrix-product and
reduction rules; importing the other families (``_rules_layers``, ``_rules_shape``) registers theirs
into it. Import the table from here, so that every rule is in it."""

from __future__ import annotations

from . import _rules_layers, _rules_shape  # noqa: F401 - each registers its rules on import
from ._rules import RULES

#: ONNX operator type -> one line saying what it becomes (docs/FROM_ONNX.md lists it).
TABLE = RULES.summary

__all__ = ["RULES", "TABLE"]
