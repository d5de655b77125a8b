"""Marked copies between algos/ files stay equal to their source line for line, and the ACCEL scripts differ
from their PLR bases only in mutation code, their settings and docstring, and a few deliberate renames."""

import re
from pathlib import Path

import pytest

from tests.copies import drifted_copies, marked_copies, unexplained_lines, unmarked_copies

REPO_ROOT = Path(__file__).resolve().parents[1]
MUTATION = re.compile(r"mutat|mutant|num_edits")
SIBLINGS = {
    ("plr.py", "accel.py"): [("plr", "accel"), ("new_levels", "fresh_levels")],
    ("plr_parallel.py", "accel_parallel.py"): [("plr_parallel", "accel_parallel")],
}
"""Sibling scripts and their deliberate renames (old, new): ACCEL's mutants take the place of new levels."""


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "algos").glob("*.py")), ids=lambda p: p.name)
def test_marked_copies_equal_their_source(path):
    assert drifted_copies(path, REPO_ROOT) == []


def test_every_copy_is_marked():
    assert unmarked_copies(sorted((REPO_ROOT / "algos").glob("*.py"))) == []


def test_checker_finds_unmarked_copies(tmp_path):
    helper = "def helper(x):\n    return x + 1\n"
    config = "class Config:\n    lr: float = 1e-4\n"
    (tmp_path / "base.py").write_text(helper + "\n\n" + config)
    (tmp_path / "marked.py").write_text("# copied from algos/base.py:helper\n" + helper + "\n\n" + config)
    (tmp_path / "unmarked.py").write_text(helper + "\n\n" + config)
    paths = [tmp_path / name for name in ("base.py", "marked.py")]
    assert unmarked_copies(paths) == []
    assert unmarked_copies([*paths, tmp_path / "unmarked.py"]) == [
        "helper is the same in base.py, unmarked.py with no `# copied from` marker on the copies"
    ]


def test_checker_finds_copies_and_drift(tmp_path):
    (tmp_path / "algos").mkdir()
    source = tmp_path / "algos" / "base.py"
    source.write_text(
        "def helper(x):\n    return x + 1  # why\n\n\nclass Net:\n    size: int = 3\n\n\ndef last(x):\n    return x\n"
    )
    copy = tmp_path / "algos" / "variant.py"
    copy.write_text(
        "# copied from algos/base.py:helper\ndef helper(x):\n    return x + 1  # why\n\n\n"
        "# copied from algos/base.py:Net\nclass Net:\n    size: int = 4\n\n\n"
        "# copied from algos/base.py:last\ndef last(x):\n    return x  # a trailing comment is part of the line\n\n\n"
        "# copied from algos/base.py:gone\ndef gone():\n    pass\n"
    )
    assert [name for name, _, _ in marked_copies(copy)] == ["helper", "Net", "last", "gone"]
    problems = drifted_copies(copy, tmp_path)
    assert len(problems) == 3
    assert "variant.py:Net differs from algos/base.py:Net" in problems[0]
    assert "variant.py:last differs from algos/base.py:last" in problems[1]
    assert "algos/base.py:gone, which does not exist" in problems[2]


@pytest.mark.parametrize(("base", "variant"), list(SIBLINGS), ids=lambda name: name)
def test_accel_differs_from_plr_only_in_mutation(base, variant):
    algos = REPO_ROOT / "algos"
    assert unexplained_lines(algos / base, algos / variant, MUTATION, SIBLINGS[base, variant]) == []


BASE = '''"""Base."""


class Config:
    lr: float = 1.0


def step(x, y):
    z = x + 1
    w = y * 2
    return combine(z, w)
'''


def test_diff_checker_judges_every_changed_line(tmp_path):
    base, variant = tmp_path / "base.py", tmp_path / "variant.py"
    base.write_text(BASE)
    explained = (
        BASE.replace('"""Base."""', '"""Variant with mutation."""')
        .replace("    lr: float = 1.0\n", "    lr: float = 2.0\n    num_edits: int = 3\n")
        .replace("    return combine(z, w)", "    return combine(mutate(z), w)")
    )
    variant.write_text(explained)
    assert unexplained_lines(base, variant, MUTATION, []) == []
    # One line mentions mutation, the one beside it in the same hunk does not: that one is reported.
    variant.write_text(explained.replace("w = y * 2", "w = y * 3"))
    assert unexplained_lines(base, variant, MUTATION, []) == [
        "variant.py line 11 (added): w = y * 3",
        "base.py line 10 (removed): w = y * 2",
    ]


def test_diff_checker_accepts_only_listed_renames(tmp_path):
    base, variant = tmp_path / "base.py", tmp_path / "variant.py"
    base.write_text(BASE)
    variant.write_text(BASE.replace("    z = x + 1\n", "    fresh = x + 1\n").replace("combine(z,", "combine(fresh,"))
    assert len(unexplained_lines(base, variant, MUTATION, [])) == 4
    assert unexplained_lines(base, variant, MUTATION, [("z", "fresh")]) == []
