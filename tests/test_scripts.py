"""Every algos/ script's command line: `--help` opens with the docstring's summary, shows its groups in reading
order (method, environment, PPO, run, devices), and documents every field in one true line, with the default of
the script's own Config; group descriptions state what the script sets; every numeric field declares its range;
field names are unique across groups (they are the flat flags)."""

import ast
import dataclasses
import functools
import importlib
import os
import re
import signal
import subprocess
import sys
import time
import types
import typing
from pathlib import Path

import pytest

from common.config import Range, flag, flags_of, summary, with_flags

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO_ROOT / "algos").glob("*.py"))
GROUP_TITLES = ["env options", "ppo options", "run options", "run.devices options"]


@functools.cache
def help_text(script: Path) -> str:
    """`python algos/X.py --help` at 100 columns, where tyro draws one group box per row, so each reads by line."""
    env = {**os.environ, "COLUMNS": "100"}
    result = subprocess.run(
        [sys.executable, str(script), "--help"], cwd=REPO_ROOT, capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


class HelpGroup(typing.NamedTuple):
    description: str
    defaults: dict[str, str]  # {an entry's first flag: what its "(default: ...)" shows}


def help_groups(text: str) -> dict[str, HelpGroup]:
    """{title: HelpGroup} of every box of a one-box-per-row --help, in order."""
    groups = {}
    for title, body in re.findall(r"╭─ (.+?) ─+╮\n(.*?)╰─+╯", text, re.DOTALL):
        lines = [line.strip()[1:-1].rstrip() for line in body.splitlines()]  # inside the box's side rules
        rule = next((i for i, line in enumerate(lines) if set(line.strip()) == {"─"}), None)
        description = " ".join(" ".join(lines[:rule] if rule is not None else []).split())
        entries = []
        for line in lines[rule + 1 if rule is not None else 0 :]:
            if line.startswith(" -"):
                entries.append(line)
            else:
                entries[-1] += line
        defaults = {}
        for entry in entries:
            shown = re.search(r"\(default: (.*)\)$", " ".join(entry.split()))
            if shown:
                defaults[entry.split()[0].rstrip(",")] = shown.group(1)
        groups[title] = HelpGroup(description, defaults)
    return groups


def config_classes(config) -> list[type]:
    """The Config class and every group dataclass nested in it."""
    found = [type(config)]
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            found += config_classes(value)
    return found


def field_docstrings(cls) -> dict[str, str | None]:
    """{field: the string literal right after it in the class body, or None}."""
    source = Path(sys.modules[cls.__module__].__file__).read_text()
    body = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef) and n.name == cls.__name__).body
    docs = {}
    for index, node in enumerate(body):
        if isinstance(node, ast.AnnAssign):
            following = body[index + 1] if index + 1 < len(body) else None
            is_doc = isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
            docs[node.target.id] = following.value.value if is_doc else None
    return docs


def underlying_type(hint):
    """int for Annotated[int | None, ...], and so on."""
    if hasattr(hint, "__metadata__"):
        hint = typing.get_args(hint)[0]
    kinds = [kind for kind in typing.get_args(hint) if kind is not type(None)]
    return kinds[0] if isinstance(hint, types.UnionType) and len(kinds) == 1 else hint


def help_arg(cls, name: str):
    hint = typing.get_type_hints(cls, include_extras=True)[name]
    return next((m for m in getattr(hint, "__metadata__", ()) if type(m).__name__ == "_ArgConfig"), None)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_help_is_grouped_and_documents_every_field(script):
    module = importlib.import_module(f"algos.{script.stem}")
    text = help_text(script)
    assert summary(module.__doc__) in " ".join(text.split()), "--help opens with the docstring summary"
    positions = [text.index(f"─ {title} ") for title in GROUP_TITLES]
    assert positions == sorted(positions) and text.index("─ options ") < positions[0]
    assert "(default: None)" not in text, "say what an unset optional field means"
    assert "130 or 143 when Ctrl+C or SIGTERM stopped it" in " ".join(text.split()), "--help names the exit statuses"
    names = []
    for cls in config_classes(module.Config()):
        hints = typing.get_type_hints(cls, include_extras=True)
        for name, doc in field_docstrings(cls).items():
            if dataclasses.is_dataclass(underlying_type(hints[name])):
                continue
            names.append(name)
            arg = help_arg(cls, name)
            assert doc or (arg and arg.help), f"{cls.__name__}.{name} undocumented"
            assert "\n" not in (doc or arg.help), f"{cls.__name__}.{name}: one line, or --help breaks it"
            assert flag(name) in text
    assert len(names) == len(set(names)), "field names are flags: unique across groups"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_every_numeric_field_declares_its_range(script):
    for cls in config_classes(importlib.import_module(f"algos.{script.stem}").Config()):
        for name, hint in typing.get_type_hints(cls, include_extras=True).items():
            if underlying_type(hint) in (int, float):
                markers = getattr(hint, "__metadata__", ())
                assert any(isinstance(marker, Range) for marker in markers), f"{cls.__name__}.{name} has no Range"


def shown_default(value) -> str:
    """A default as tyro writes it after --help's "default:" (lists space-separated)."""
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_help_defaults_are_the_scripts_config_defaults(script):
    """What --help calls a flag's default is the default of the Config() field behind it, in this script (the
    replay scripts stop at --total-student-updates 30000, DR has no such limit)."""
    shown = {}
    for group in help_groups(help_text(script)).values():
        shown.update(group.defaults)
    # The command line names the run folder after the script's file (a copy never writes into the original's runs).
    defaults = flags_of(with_flags(importlib.import_module(f"algos.{script.stem}").Config(), run_name=script.stem))
    assert sorted(shown) == sorted(flag(name) for name in defaults), "every field's flag shows one default"
    for name, value in defaults.items():
        if value is None or value == []:  # unset or empty: the hint says what that means, as every script's run does
            assert shown[flag(name)] not in ("None", ""), f"{flag(name)}: say what an unset value means"
        else:
            assert shown[flag(name)] == shown_default(value), f"{flag(name)} in --help of {script.name}"


def methods_table_columns() -> list[str]:
    """The method columns of docs/methods.md's table of shipped hyperparameters."""
    header = next(
        line for line in (REPO_ROOT / "docs/methods.md").read_text().splitlines() if line.startswith("| setting")
    )
    return [cell.strip() for cell in header.strip("|").split("|")[1:]]


def methods_anchors() -> set[str]:
    headings = re.findall(r"^#+ (.+)$", (REPO_ROOT / "docs/methods.md").read_text(), re.MULTILINE)
    return {re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_group_titles_and_descriptions_are_true_for_the_script(script):
    """The groups come in reading order, the first holding exactly the method's own fields, as the help says; the
    run group states this script's run length; numbers in the env group are this script's; the PPO group's
    references to docs/methods.md exist."""
    config = importlib.import_module(f"algos.{script.stem}").Config()
    text = help_text(script)
    groups = help_groups(text)
    assert list(groups) == ["options", *GROUP_TITLES]
    own = [
        field.name for field in dataclasses.fields(config) if not dataclasses.is_dataclass(getattr(config, field.name))
    ]
    assert sorted(groups["options"].defaults) == sorted(flag(name) for name in own)
    guide = "options holds the method's own settings" if own else "options holds only --help"
    assert guide in " ".join(text.split()), "--help says what the untitled first group holds"

    run = config.run
    assert f"{run.total_updates:,} updates" in groups["run options"].description
    if run.total_student_updates is not None:
        assert f"{run.total_student_updates:,} student updates" in groups["run options"].description

    env = config.env
    described = groups["env options"].description
    assert all(int(side) == env.maze_size for side in re.findall(r"(\d+)x\d+", described))
    assert all(int(walls) == env.n_walls for walls in re.findall(r"(\d+) walls", described))
    assert all(int(steps) == env.max_steps for steps in re.findall(r"(\d+) steps", described))

    described = groups["ppo options"].description
    references = re.findall(r"docs/methods\.md, (.+?) column", described)
    assert set(references) <= set(methods_table_columns())
    assert set(re.findall(r"docs/methods\.md#([\w-]+)", described)) <= methods_anchors()
    assert references or "docs/methods.md#" in described, "the PPO group says where its defaults come from"


@pytest.mark.parametrize("delay", [0.3, 0.8])
def test_ctrl_c_while_the_libraries_load_ends_quietly(delay):
    """A Ctrl+C in the first seconds, before the driver's handler exists, used to print Python's traceback from
    deep inside an import (nothing is written by then). The window left is the interpreter's own start-up."""
    process = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "algos" / "dr.py"), "--help"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode in (0, 130), (process.returncode, stderr[-2000:])  # 0: --help finished first
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-2000:]


def test_every_script_quiets_ctrl_c_before_loading_its_libraries():
    """Each script imports common.quiet_start before any other library (only sys and pathlib, which its path line
    needs, come first)."""
    for script in SCRIPTS:
        tree = ast.parse(script.read_text())
        imports = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
        first_library = next(node for node in imports if not {"sys", "pathlib"} >= imported_names(node))
        assert imported_names(first_library) == {"common.quiet_start"}, script.name


def test_quiet_start_acts_only_for_a_script_of_algos_run_from_the_command_line():
    """Imported by a test (here) or by common.evaluate, the module leaves Ctrl+C alone; run as `python algos/x.py`
    it makes Ctrl+C end the process with status 130 and no traceback (the test above sends it)."""
    import common.quiet_start

    before = signal.getsignal(signal.SIGINT)
    importlib.reload(common.quiet_start)  # runs the module's body again, in this process
    assert signal.getsignal(signal.SIGINT) is before


def imported_names(node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.ImportFrom):
        return {node.module or ""}
    return {alias.name for alias in node.names}
