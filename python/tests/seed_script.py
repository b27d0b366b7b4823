"""Extracts the seed-001 example script, verbatim, from the seed document.

The seed (``shared/seeds/001_17eed33f988bcf30.txt``) is a web page: prose
around three code listings (the level-1 kernel with the imports, the level-2
kernel, and the dispatch). This module cuts the listings out by their first
and last lines and joins them, changing no character of the code.
``python/tests/data/seed001_script.py`` keeps a copy for machines without
the seed; a test checks that the copy still matches the seed when both exist.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

SEED_NAME = "001_17eed33f988bcf30.txt"
COPY = Path(__file__).parent / "data" / "seed001_script.py"


def seed_path():
    """The seed file, or None: $ENIGMA_SEEDS_DIR, then shared/seeds beside the checkout."""
    candidates = []
    if os.environ.get("ENIGMA_SEEDS_DIR"):
        candidates.append(Path(os.environ["ENIGMA_SEEDS_DIR"]) / SEED_NAME)
    repo = Path(__file__).resolve().parents[2]
    candidates += [repo.parent / "shared" / "seeds" / SEED_NAME, repo / "shared" / "seeds" / SEED_NAME]
    for c in candidates:
        if c.is_file():
            return c
    return None


# (first line of a listing, the prose line that ends it)
_LISTINGS = [
    ("import enigma", "Level 2: final reduction"),
    ("@enigma.kernel", "Full dispatch"),
    ("compiled_pass1 = enigma.compile(reduce_threadgroup)", "Notes"),
]


def extract(text: str) -> str:
    """The seed's code listings, in order, joined into one script."""
    lines = text.splitlines()
    pos = 0
    chunks = []
    for first, stop in _LISTINGS:
        start = next(i for i in range(pos, len(lines)) if lines[i].rstrip() == first)
        end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == stop)
        chunk = lines[start:end]
        while chunk and not chunk[-1].strip():
            chunk.pop()
        chunks.append("\n".join(chunk))
        pos = end
    script = "\n\n".join(chunks) + "\n"
    ast.parse(script)  # the listings together must be Python
    return script


def seed_script() -> tuple:
    """(script, where it came from): the seed when present, else the copy."""
    p = seed_path()
    if p is not None:
        return extract(p.read_text(encoding="utf-8")), str(p)
    return COPY.read_text(encoding="utf-8"), str(COPY)
