"""Text in aligned columns, as `status`, `report` and a sweep's table show a run's figures and values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def value_text(value: Any) -> str:
    """A value as a table shows it: floats to 6 significant digits, anything else as it prints."""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    """The rows (a header first, as a rule), each column as wide as its widest cell, two spaces apart."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
