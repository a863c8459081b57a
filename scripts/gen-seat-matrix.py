#!/usr/bin/env python3
"""Writes docs/reference/seats.md from tests/integration/seat_matrix.py, the cells
tests/integration/test_seat_matrix.py walks: `scripts/gen-seat-matrix.py docs/reference/seats.md`
(or `-` for stdout). test_seat_matrix.py checks the committed page is what this prints."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
import seat_matrix  # noqa: E402

if len(sys.argv) != 2:
    sys.exit("usage: gen-seat-matrix.py OUTPUT.md (or - for stdout)")
text = seat_matrix.markdown()
if sys.argv[1] == "-":
    sys.stdout.write(text)
else:
    Path(sys.argv[1]).write_text(text)
