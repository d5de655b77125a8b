"""Marked copies between algos/ files stay equal to their source (STYLE.md rule 9), and the ACCEL scripts
differ from their PLR bases only in mutation code, Config and docstring."""

import re
from pathlib import Path

import pytest

from tests.copies import drifted_copies, marked_copies, unexplained_hunks

REPO_ROOT = Path(__file__).resolve().parents[1]
MUTATION = re.compile(r"mutat|mutant|num_edits")


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


@pytest.mark.parametrize(("base", "variant"), [("plr.py", "accel.py"), ("plr_parallel.py", "accel_parallel.py")])
def test_accel_differs_from_plr_only_in_mutation(base, variant):
    algos = REPO_ROOT / "algos"
    assert unexplained_hunks(algos / base, algos / variant, MUTATION) == []


def test_diff_checker_flags_changes_outside_the_topic(tmp_path):
    base, variant = tmp_path / "base.py", tmp_path / "variant.py"
    base.write_text(
        '"""Base."""\n\n\nclass Config:\n    lr: float = 1.0\n\n\ndef step(x):\n    y = x + 1\n    return y\n'
    )
    variant.write_text(
        '"""Variant with mutation."""\n\n\nclass Config:\n    lr: float = 2.0\n    num_edits: int = 3\n\n\n'
        "def step(x):\n    y = x + 2\n    return mutate(y)\n"
    )
    assert unexplained_hunks(base, variant, MUTATION) == []
    variant.write_text(variant.read_text().replace("return mutate(y)", "return y"))
    assert unexplained_hunks(base, variant, MUTATION) == ["variant.py line 10: y = x + 2"]
