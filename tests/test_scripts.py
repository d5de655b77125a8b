"""Every algos/ script's command line: `--help` opens with the docstring's summary, shows its groups in reading
order (method, environment, PPO, run, devices), and documents every field in one true line; every numeric
field declares its range; field names are unique across groups (they are the flat flags)."""

import ast
import dataclasses
import importlib
import os
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest

from common.config import Range, flag, summary

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO_ROOT / "algos").glob("*.py"))
GROUP_TITLES = ["env options", "ppo options", "run options", "run.devices options"]


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
    env = {**os.environ, "COLUMNS": "200"}
    result = subprocess.run(
        [sys.executable, str(script), "--help"], cwd=REPO_ROOT, capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert summary(module.__doc__) in " ".join(text.split()), "--help opens with the docstring summary"
    positions = [text.index(f"─ {title} ") for title in GROUP_TITLES]
    assert positions == sorted(positions) and text.index("─ options ") < positions[0]
    assert "(default: None)" not in text, "say what an unset optional field means"
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
