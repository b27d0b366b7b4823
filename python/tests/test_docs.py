"""Every Python code block of README.md and docs/*.md runs as pasted.

Each ```python block is written to a file of its own and run by this
interpreter in a fresh process from the repository root, as a reader who
pastes it into a file would run it (``@enigma.kernel`` reads the kernel's
source, so the code has to live in a file). A block fails the test when it
raises, exits non-zero or prints to stderr.

A block that needs a GPU is marked by the line ``<!-- gpu -->`` right above
it; it runs when ``ENIGMA_TEST_DEVICE=cuda`` (the suite's switch for GPU
machines) and is skipped with that reason otherwise. The ``enigma`` command
lines of the shell blocks are checked against the CLI itself: each names a
subcommand whose ``--help`` lists every option the line uses. Rust blocks are run by
rustdoc (``crates/enigma/src/doc_tests.rs``); every fenced block names its
language, so rustdoc never mistakes a shell or Python block for Rust.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
GPU_MARK = "<!-- gpu -->"
FENCE = re.compile(r"^```(\S*)\s*$")


def code_blocks(path: Path):
    """(language, first line number, text, needs a GPU) of each fenced block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i + 1
        j = start
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        gpu = any(lines[k].strip() == GPU_MARK for k in range(max(0, i - 2), i))
        blocks.append((lang, start + 1, "\n".join(lines[start:j]) + "\n", gpu))
        i = j + 1
    return blocks


PYTHON_BLOCKS = [
    pytest.param(text, gpu, id=f"{path.relative_to(ROOT)}:{line}")
    for path in PAGES
    for lang, line, text, gpu in code_blocks(path)
    if lang == "python"
]


def test_the_pages_have_python_blocks():
    assert (ROOT / "docs").is_dir(), "docs/ is missing"
    assert len(PYTHON_BLOCKS) >= 5, f"only {len(PYTHON_BLOCKS)} Python blocks found in {[p.name for p in PAGES]}"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_block_names_its_language(path):
    unnamed = [line for lang, line, _, _ in code_blocks(path) if not lang]
    assert not unnamed, f"{path.name}: code blocks without a language at lines {unnamed} (rustdoc would compile them as Rust)"


@pytest.mark.parametrize("text, gpu", PYTHON_BLOCKS)
def test_python_block_runs_as_pasted(text, gpu, tmp_path):
    if gpu and os.environ.get("ENIGMA_TEST_DEVICE") != "cuda":
        pytest.skip("needs a CUDA GPU (run with ENIGMA_TEST_DEVICE=cuda)")
    script = tmp_path / "block.py"
    script.write_text(text, encoding="utf-8")
    run = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and not run.stderr, f"exit {run.returncode}\n--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}"


def enigma_binary():
    """The CLI to check the shell blocks against: ``$ENIGMA_BIN``, ``enigma`` on
    the PATH, or a build in ``target/`` (None when there is none)."""
    for candidate in (os.environ.get("ENIGMA_BIN"), shutil.which("enigma"),
                      ROOT / "target" / "release" / "enigma", ROOT / "target" / "debug" / "enigma"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


COMMAND_LINES = [
    pytest.param(line, id=f"{path.relative_to(ROOT)}:{start}")
    for path in PAGES
    for lang, start, text, _ in code_blocks(path)
    if lang == "sh"
    for line in text.splitlines()
    if line.startswith("enigma ")
]


@pytest.mark.parametrize("line", COMMAND_LINES)
def test_enigma_command_lines_use_real_options(line):
    binary = enigma_binary()
    if binary is None:
        pytest.skip("no enigma binary (cargo install --locked --path crates/enigma, or set ENIGMA_BIN)")
    words = shlex.split(line.split("#")[0])
    sub = words[1]
    assert not sub.startswith("-"), f"`{line}` names no subcommand"
    helped = subprocess.run([binary, sub, "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0, f"`enigma {sub} --help` failed: {helped.stderr}"
    for option in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
        assert option in helped.stdout, f"`{line}`: `enigma {sub}` has no option {option}"
