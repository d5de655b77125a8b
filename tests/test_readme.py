"""The README as a newcomer uses it: its Python examples run as a file run from the repo root with PYTHONPATH=.
(as it says), and its commands, pasted in order on a fresh clone, parse, and read only run folders that an earlier
command made (and, for the report, evaluated on the same mazes). Every training command in benchmarks/README.md
parses too."""

import importlib
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import tyro

from common import evaluate, report
from common.config import parse_command_line

REPO_ROOT = Path(__file__).resolve().parents[1]
README = (REPO_ROOT / "README.md").read_text()


def section(markdown: str, heading: str) -> str:
    """The text of `heading` up to the next heading of the same level."""
    start = markdown.index(f"\n{heading}\n") + 1
    following = markdown.find("\n## ", start + len(heading))
    return markdown[start : following if following != -1 else None]


def run_python_block(text: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """The first ```python block of `text`, saved outside the repo and run from the repo root with PYTHONPATH=.,
    as the README says to run it."""
    script = tmp_path / "example.py"
    script.write_text(re.search(r"```python\n(.*?)```", text, re.DOTALL).group(1))
    env = {**os.environ, "PYTHONPATH": "."}
    return subprocess.run([sys.executable, str(script)], cwd=REPO_ROOT, capture_output=True, text=True, env=env)


@pytest.mark.slow
def test_use_from_python_example_runs(tmp_path):
    text = section(README, "## Use from Python")
    assert "PYTHONPATH=. .venv/bin/python" in text, "the README says how to run it"
    result = run_python_block(text, tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("return per seed: [") and len(lines[0].split("[")[1].split()) == 3
    assert lines[1].startswith("SixteenRooms solve rate per seed: [")


def test_environment_example_runs(tmp_path):
    result = run_python_block(section(README, "## Environment"), tmp_path)
    assert result.returncode == 0, result.stderr


def documented_commands(markdown: str) -> list[list[str]]:
    """Every `.venv/bin/python ...` line of the markdown's bash blocks in order, continuation lines joined and the
    block's `NAME="..."` assignments substituted, as argv lists without the interpreter."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", markdown, re.DOTALL):
        text = block.replace("\\\n", " ")
        variables = dict(re.findall(r'^(\w+)="([^"]*)"', text, re.MULTILINE))
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            for command in line.split("&&"):
                command = command.strip()
                if command.startswith(".venv/bin/python "):
                    for name, value in variables.items():
                        command = command.replace(f"${name}", value)
                    commands.append(shlex.split(command)[1:])
    return commands


def training_config(argv: list[str]):
    module = importlib.import_module(f"algos.{Path(argv[0]).stem}")
    return parse_command_line(module.Config, "", argv[1:])


@pytest.mark.parametrize("document", ["README.md", "benchmarks/README.md"])
def test_documented_training_commands_parse(document):
    """Each documented training command names real flags with valid values (parsing runs every range and
    cross-field check, before anything would compile). A `--resume` command continues a folder that an earlier
    command of the document makes (a run, or a fork of one) and that this machine does not have: it must name that
    folder, and its flags are checked as a fresh run's."""
    every = documented_commands((REPO_ROOT / document).read_text())
    commands = [(position, argv) for position, argv in enumerate(every) if argv[0].startswith("algos/")]
    assert len(commands) >= 2
    for position, argv in commands:
        resumes = "--resume" in argv
        run = training_config([arg for arg in argv if arg != "--resume"]).run
        assert run.run_name, argv
        if resumes:
            named = [earlier for earlier in every[:position] if named_folder(earlier) == (run.runs_dir, run.run_name)]
            assert named, f"{shlex.join(argv)}: no earlier command makes {run.runs_dir}/{run.run_name}"


def named_folder(argv: list[str]) -> tuple[str, str] | None:
    """(--runs-dir, --run-name) a command names, None without both."""
    flags = dict(zip(argv, argv[1:], strict=False))  # each flag with the word after it
    if "--runs-dir" not in flags or "--run-name" not in flags:
        return None
    return flags["--runs-dir"], flags["--run-name"]


def test_readme_commands_work_in_order():
    """Pasted in order on a fresh clone, no README command reads a run folder that no earlier command made, starts
    a run whose folder an earlier one made, or reports a folder that was not evaluated on the same mazes as the
    others."""
    evaluated: dict[Path, tuple[str, ...] | None] = {}  # every run folder made so far: its evaluation's mazes
    for argv in documented_commands(README):
        if argv[0].startswith("algos/"):
            run = training_config(argv).run
            folder = Path(run.runs_dir) / run.run_name
            if run.resume:
                assert folder in evaluated, f"{shlex.join(argv)}: no earlier command starts {folder}"
            else:
                assert folder not in evaluated or run.overwrite, f"{shlex.join(argv)}: {folder} exists by then"
                evaluated[folder] = None
        elif argv[:2] == ["-m", "common.evaluate"]:
            args = tyro.cli(evaluate.Args, args=argv[2:])
            assert args.run_dir in evaluated, f"{shlex.join(argv)}: no earlier command makes {args.run_dir}"
            if args.mazes:
                evaluated[args.run_dir] = tuple(sorted(args.mazes))
        elif argv[:2] == ["-m", "common.report"]:
            args = tyro.cli(report.Args, args=argv[2:])
            folders = [*args.runs, *(report.parse_label(text)[1] for text in args.label)]
            for folder in folders:
                assert evaluated.get(folder), f"{shlex.join(argv)}: no earlier command evaluates {folder}"
            assert len({evaluated[folder] for folder in folders}) == 1, f"{shlex.join(argv)}: mazes differ"
        elif argv[0] == "-c":
            compile(argv[1], "<README>", "exec")  # a one-line check of the install; reads no run folder
        elif argv[0].startswith("benchmarks/"):  # reads no run folder; its flags exist
            usage = subprocess.run([sys.executable, argv[0], "--help"], cwd=REPO_ROOT, capture_output=True, text=True)
            assert usage.returncode == 0 and all(arg in usage.stdout for arg in argv if arg.startswith("--")), argv
        else:
            assert argv[:2] == ["-m", "pytest"], f"{shlex.join(argv)}: teach this test what the command reads"


def test_the_test_extra_installs_what_pytests_options_need():
    """pyproject's addopts pass `-n` (pytest-xdist): `pip install -e ".[test]"` must bring it, or pytest refuses
    its own options in a venv made without requirements.txt."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    addopts = shlex.split(project["tool"]["pytest"]["ini_options"]["addopts"])
    assert "-n" in addopts
    assert {"pytest", "pytest-xdist"} <= set(project["project"]["optional-dependencies"]["test"])
