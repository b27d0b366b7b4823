"""Extracts the seed-001 example script (and seed 004's autotuning loop),
verbatim, from the seed documents.

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


def seed_path(name=SEED_NAME):
    """The seed file ``name``, or None: $ENIGMA_SEEDS_DIR, then shared/seeds beside the checkout."""
    candidates = []
    if os.environ.get("ENIGMA_SEEDS_DIR"):
        candidates.append(Path(os.environ["ENIGMA_SEEDS_DIR"]) / name)
    repo = Path(__file__).resolve().parents[2]
    candidates += [repo.parent / "shared" / "seeds" / name, repo / "shared" / "seeds" / name]
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


AUTOTUNE_SEED_NAME = "004_32af8b759479bf93.txt"
AUTOTUNE_COPY = Path(__file__).parent / "data" / "seed004_autotune.py"


def extract_autotune(text: str) -> str:
    """Seed 004's threadgroup autotuning loop: the Python listing that
    defines ``autotune_threadgroup``, verbatim."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("def autotune_threadgroup("))
    while start > 0 and lines[start - 1].strip() != "```python":
        start -= 1
    end = next(i for i in range(start, len(lines)) if lines[i].strip() == "```")
    script = "\n".join(lines[start:end]) + "\n"
    ast.parse(script)
    return script


def autotune_script() -> tuple:
    """(seed 004's autotune listing, where it came from): the seed when
    present, else the copy in tests/data."""
    p = seed_path(AUTOTUNE_SEED_NAME)
    if p is not None:
        return extract_autotune(p.read_text(encoding="utf-8")), str(p)
    return AUTOTUNE_COPY.read_text(encoding="utf-8"), str(AUTOTUNE_COPY)
