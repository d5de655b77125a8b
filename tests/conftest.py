"""Shared test fixtures. Reference data lives in ../shared/fixtures; tests that need it skip cleanly without it."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = REPO_ROOT.parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def amaze_fixture():
    path = Path(os.environ.get("AMAZE_FIXTURE", SHARED_FIXTURES / "amaze_minimax_seed0.npz"))
    if not path.exists():
        pytest.skip(f"AMaze reference fixture not found at {path} (set AMAZE_FIXTURE to its path)")
    return dict(np.load(path))


@pytest.fixture(scope="session")
def heldout_json():
    path = SHARED_FIXTURES / "heldout_mazes.json"
    if not path.exists():
        pytest.skip(f"held-out maze reference not found at {path}")
    return json.loads(path.read_text())
