"""Shared test fixtures: the reference data recorded from minimax-lib 0.2.0, kept in tests/fixtures/ (how it was
recorded: tests/fixtures/README.md). AMAZE_FIXTURE points the parity tests at another recording."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def amaze_fixture():
    path = Path(os.environ.get("AMAZE_FIXTURE", FIXTURES / "amaze_minimax_seed0.npz"))
    if not path.exists():
        pytest.fail(f"AMaze reference fixture not found at {path} (AMAZE_FIXTURE overrides tests/fixtures/)")
    return dict(np.load(path))


@pytest.fixture(scope="session")
def heldout_json():
    return json.loads((FIXTURES / "heldout_mazes.json").read_text())
