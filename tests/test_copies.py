"""Marked copies between algos/ files stay equal to their source (STYLE.md rule 9)."""

from pathlib import Path

import pytest

from tests.copies import drifted_copies, marked_copies

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "algos").glob("*.py")), ids=lambda p: p.name)
def test_marked_copies_equal_their_source(path):
    assert drifted_copies(path, REPO_ROOT) == []


def test_checker_finds_copies_and_drift(tmp_path):
    (tmp_path / "algos").mkdir()
    source = tmp_path / "algos" / "base.py"
    source.write_text("def helper(x):\n    return x + 1\n\n\nclass Net:\n    size: int = 3\n")
    copy = tmp_path / "algos" / "variant.py"
    copy.write_text(
        "# copied from algos/base.py:helper\ndef helper(x):\n    return x + 1\n\n\n"
        "# copied from algos/base.py:Net\nclass Net:\n    size: int = 4\n\n\n"
        "# copied from algos/base.py:gone\ndef gone():\n    pass\n"
    )
    assert [name for name, _, _ in marked_copies(copy)] == ["helper", "Net", "gone"]
    problems = drifted_copies(copy, tmp_path)
    assert len(problems) == 2
    assert "variant.py:Net differs from algos/base.py:Net" in problems[0]
    assert "algos/base.py:gone, which does not exist" in problems[1]
