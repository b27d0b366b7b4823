"""Shared fixtures of the pytest suite: the runtime under test and helpers.

``ENIGMA_TEST_DEVICE`` picks the device every test runs on (default
``cpu``, the simulator; ``cuda`` or ``auto`` on a GPU machine). Every
result is compared with a numpy (or plain Python) reference computed in the
test itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

import enigma

sys.path.insert(0, str(Path(__file__).parent))

DEVICE = os.environ.get("ENIGMA_TEST_DEVICE", "cpu")


@pytest.fixture(scope="session")
def rt():
    return enigma.MetalRuntime(device=DEVICE)


@pytest.fixture(scope="session")
def sim():
    """The simulator, for what only it does (the sanitizer, OOB errors)."""
    return enigma.MetalRuntime(device="cpu")


def as_array(raw, dtype, shape=None):
    a = np.frombuffer(raw, dtype=dtype).copy()
    return a if shape is None else a.reshape(shape)
