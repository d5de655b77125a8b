"""Marked copies between algos/ files stay equal to their source line for line, and the ACCEL scripts differ
from their PLR bases only in mutation code, their settings and docstring, and a few deliberate renames."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.copies import (
    PROJECT_SCRIPTS,
    drifted_copies,
    marked_copies,
    project_copy_problems,
    unexplained_lines,
    unmarked_copies,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
MUTATION = re.compile(r"mutat|mutant|num_edits")
SIBLINGS = {
    ("plr.py", "accel.py"): [("plr", "accel"), ("new_levels", "fresh_levels")],
    ("plr_parallel.py", "accel_parallel.py"): [("plr_parallel", "accel_parallel")],
}
"""Sibling scripts and their deliberate renames (old, new): ACCEL's mutants take the place of new levels."""


@pytest.mark.parametrize("name", PROJECT_SCRIPTS)
def test_marked_copies_equal_their_source(name):
    assert drifted_copies(REPO_ROOT / "algos" / name, REPO_ROOT) == []


def test_every_copy_is_marked():
    assert unmarked_copies([REPO_ROOT / "algos" / name for name in PROJECT_SCRIPTS]) == []


@pytest.mark.slow
def test_a_researchers_variant_trains_into_its_own_folder_and_passes_the_checks(tmp_path):
    """README's workflow in a copy of the repository: `cp algos/accel.py algos/my_variant.py`, change a default and
    a copied function, train a few tiny updates. The run folder takes the file's name, the original's runs are
    untouched, and the checks on copies still pass with the variant in algos/."""
    repo = tmp_path / "repo"
    for folder in ("algos", "common", "envs"):
        shutil.copytree(REPO_ROOT / folder, repo / folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = (repo / "algos" / "accel.py").read_text()
    edits = [
        ("    num_edits: Annotated[int, AT_LEAST_ONE] = 20\n", "    num_edits: Annotated[int, AT_LEAST_ONE] = 3\n"),
        ("    return transitions, end\n", "    transitions = transitions._replace(reward=transitions.reward * 1.0)\n"
         "    return transitions, end\n"),
    ]  # fmt: skip
    for old, new in edits:
        assert source.count(old) == 1, f"algos/accel.py no longer has {old!r}: update this test"
        source = source.replace(old, new)
    (repo / "algos" / "my_variant.py").write_text(source)
    tiny = ["--num-envs", "4", "--num-steps", "8", "--max-steps", "6", "--maze-size", "5", "--lstm-size", "8"]
    tiny += ["--buffer-size", "8", "--total-updates", "4", "--log-interval", "2", "--eval-interval", "0"]
    tiny += ["--checkpoint-interval", "2", "--screenshot-interval", "0", "--runs-dir", str(tmp_path / "runs")]
    result = subprocess.run(
        [sys.executable, str(repo / "algos" / "my_variant.py"), *tiny], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "runs" / "my_variant" / "config.json").read_text())["config"]["num_edits"] == 3
    assert not (tmp_path / "runs" / "accel").exists()
    assert project_copy_problems(repo) == []
    assert drifted_copies(repo / "algos" / "my_variant.py", repo) != [], "the variant's edit is a drift, unchecked"


WALKS_ALGOS = ("tests/test_scripts.py",)
"""The test files that check every file in algos/ (the others name the project's scripts)."""


@pytest.mark.slow
def test_a_copied_script_passes_every_test_that_walks_algos(tmp_path):
    """README promises that `cp algos/accel.py algos/my_accel.py` (edited or not) keeps the suite passing: in a
    clone of the project with an unedited copy and an edited one added, every test of the files that walk algos/
    passes, fast and slow tier, each copy's parametrizations included (a copy's --help names its run folder after
    the copy, not accel). Both copies share one run of those tests: each is its own parametrization there."""
    repo = tmp_path / "repo"
    for folder in ("algos", "common", "envs", "tests", "docs"):
        shutil.copytree(REPO_ROOT / folder, repo / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, repo / name)
    source = (repo / "algos" / "accel.py").read_text()
    default = "    num_edits: Annotated[int, AT_LEAST_ONE] = 20\n"
    assert source.count(default) == 1, "algos/accel.py no longer has this default: update this test"
    (repo / "algos" / "my_accel.py").write_text(source)
    (repo / "algos" / "my_edited_accel.py").write_text(source.replace(default, default.replace("20", "7")))
    pytest_command = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider"]
    result = subprocess.run([*pytest_command, *WALKS_ALGOS], capture_output=True, text=True, cwd=repo)
    assert result.returncode == 0, result.stdout[-3000:]
    collected = subprocess.run(
        [*pytest_command, "--collect-only", *WALKS_ALGOS], capture_output=True, text=True, cwd=repo
    ).stdout
    for copy in ("my_accel.py", "my_edited_accel.py"):
        assert copy in collected, f"{copy}'s own parametrizations ran"


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
