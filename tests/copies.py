"""The checks behind the house rule on copies: a top-level def or class preceded by `# copied from algos/X.py:name`
must equal `name` in algos/X.py line for line (whole physical lines, trailing comments included), and a
method file may differ from its base only where the method does (`diff algos/plr.py algos/accel.py` shows
mutation). They hold for the project's own scripts (`PROJECT_SCRIPTS`): a researcher's variant, a copy of one of
them edited at will, is not checked. Used by tests/test_copies.py."""

import ast
import difflib
import re
from pathlib import Path

MARKER = re.compile(r"#\s*copied from (?P<path>[\w/.]+\.py):(?P<name>\w+)\s*$")
PROJECT_SCRIPTS = ("dr.py", "paired.py", "plr.py", "accel.py", "plr_parallel.py", "accel_parallel.py", "sfl.py")
"""The scripts whose copies are kept equal to their sources; any other file in algos/ is a variant of someone's."""
CONFIG_GROUPS = ("Config", "Environment", "PPO")
"""Classes holding a script's settings: a variant may change any of their lines (defaults, help texts)."""
TOKEN = re.compile(r"\w+|[^\w\s]")


def _definitions(tree: ast.Module):
    return [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)]


def _first_line(node) -> int:
    return min([node.lineno, *(decorator.lineno for decorator in getattr(node, "decorator_list", []))])


def top_level_sources(path: Path) -> dict[str, str]:
    """Every top-level def and class by name: its whole physical lines, decorators and trailing comments included."""
    source = path.read_text()
    lines = source.splitlines()
    return {
        node.name: "\n".join(lines[_first_line(node) - 1 : node.end_lineno]) for node in _definitions(ast.parse(source))
    }


def marked_copies(path: Path) -> list[tuple[str, str, str]]:
    """(name here, source file, source name) for every marker in `path`; the marker sits on the line
    right above the def/class (or its first decorator)."""
    lines = path.read_text().splitlines()
    found = []
    for node in _definitions(ast.parse(path.read_text())):
        first = _first_line(node)
        if first >= 2 and (match := MARKER.search(lines[first - 2])):
            found.append((node.name, match.group("path"), match.group("name")))
    return found


def drifted_copies(path: Path, repo_root: Path) -> list[str]:
    """Messages for marked copies in `path` that differ from their source."""
    here = top_level_sources(path)
    problems = []
    for name, source_path, source_name in marked_copies(path):
        source_file = repo_root / source_path
        if not source_file.exists():
            problems.append(f"{path.name}:{name} is marked as copied from missing {source_path}")
            continue
        original = top_level_sources(source_file).get(source_name)
        if original is None:
            problems.append(
                f"{path.name}:{name} is marked as copied from {source_path}:{source_name}, which does not exist"
            )
        elif original != here[name]:
            problems.append(
                f"{path.name}:{name} differs from {source_path}:{source_name}; re-copy it or drop the marker"
            )
    return problems


class _Layout:
    """Per line of a file (markers removed): the code statement it belongs to, the comment block it is part of,
    the top-level definition around it, and whether it lies in the docstring or a config class."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        tree = ast.parse("\n".join(lines))
        self.statement: dict[int, str] = {}
        spans: dict[int, int] = {}
        for node in ast.walk(tree):
            if not isinstance(node, ast.stmt):
                continue
            body = getattr(node, "body", None)
            first = _first_line(node)
            last = body[0].lineno - 1 if isinstance(body, list) and body else node.end_lineno
            text = "\n".join(lines[first - 1 : last])
            for index in range(first - 1, max(last, first)):
                if index not in spans or last - first < spans[index]:
                    spans[index], self.statement[index] = last - first, text
        self.definition: dict[int, str] = {}
        self.allowed: set[int] = set()
        for node in tree.body:
            span = range(_first_line(node) - 1, node.end_lineno)
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                self.definition.update(dict.fromkeys(span, node.name))
                if isinstance(node, ast.ClassDef) and node.name in CONFIG_GROUPS:
                    self.allowed.update(span)
        if tree.body and isinstance(tree.body[0], ast.Expr):
            self.allowed.update(range(tree.body[0].lineno - 1, tree.body[0].end_lineno))

    def comment_block(self, index: int) -> str:
        start = end = index
        while start > 0 and self.lines[start - 1].strip().startswith("#"):
            start -= 1
        while end + 1 < len(self.lines) and self.lines[end + 1].strip().startswith("#"):
            end += 1
        return "\n".join(self.lines[start : end + 1])

    def explains(self, index: int, topic: re.Pattern) -> bool:
        """Whether line `index` is explained by `topic` on its own: blank, in the docstring or a config class, in
        a definition named for the topic, or part of a statement or comment block that mentions it."""
        line = self.lines[index].strip()
        if not line or index in self.allowed or topic.search(self.definition.get(index, "")):
            return True
        if line.startswith("#"):
            return bool(topic.search(self.comment_block(index)))
        return bool(topic.search(self.statement.get(index, line)))


def _renamed(line: str, renames: list[tuple[str, str]]) -> str:
    for old, new in renames:
        line = re.sub(rf"\b{re.escape(old)}\b", new, line)
    return line


def unexplained_lines(base: Path, variant: Path, topic: re.Pattern, renames: list[tuple[str, str]]) -> list[str]:
    """Every changed line of `diff base variant` that `topic` does not explain (copy markers are ignored).

    An added line is explained by its own context (`_Layout.explains`). A removed line is explained by its own
    context in the base, or by the change that replaced it: a similar added line (difflib ratio >= 0.5) that is
    explained, or explained added statements holding every token of it (a statement extended for the topic).
    `renames` lists deliberate renames (old, new): a line that differs only by them is explained."""
    base_lines, variant_lines = (
        [line for line in path.read_text().splitlines() if not MARKER.search(line)] for path in (base, variant)
    )
    base_layout, variant_layout = _Layout(base_lines), _Layout(variant_lines)
    problems = []
    matcher = difflib.SequenceMatcher(a=base_lines, b=variant_lines, autojunk=False)
    for tag, base_start, base_end, variant_start, variant_end in matcher.get_opcodes():
        if tag == "equal":
            continue
        added = range(variant_start, variant_end)
        added_texts = {_renamed(base_lines[i], renames) for i in range(base_start, base_end)}
        explained_added = [i for i in added if variant_layout.explains(i, topic)]
        for index in added:
            if index not in explained_added and variant_lines[index] not in added_texts:
                problems.append(f"{variant.name} line {index + 1} (added): {variant_lines[index].strip()}")
        topic_tokens = set()
        for index in explained_added:
            topic_tokens.update(TOKEN.findall(variant_layout.statement.get(index, variant_lines[index])))
        renamed_added = {_renamed(variant_lines[i], [(new, old) for old, new in renames]) for i in added}
        for index in range(base_start, base_end):
            line = base_lines[index]
            similar = any(
                difflib.SequenceMatcher(a=line.strip(), b=variant_lines[i].strip()).ratio() >= 0.5
                for i in explained_added
            )
            extended = set(TOKEN.findall(line)) <= topic_tokens
            if not (base_layout.explains(index, topic) or similar or extended or line in renamed_added):
                problems.append(f"{base.name} line {index + 1} (removed): {line.strip()}")
    return problems


def unmarked_copies(paths: list[Path]) -> list[str]:
    """Messages for top-level definitions that equal one of the same name in another of `paths` with neither
    carrying a copy marker: of a group of identical definitions, only the source may go unmarked. A script's
    settings classes (CONFIG_GROUPS) are its own and exempt."""
    groups: dict[tuple[str, str], list[tuple[str, bool]]] = {}
    for path in paths:
        marked = {name for name, _, _ in marked_copies(path)}
        for name, source in top_level_sources(path).items():
            if name not in CONFIG_GROUPS:
                groups.setdefault((name, source), []).append((path.name, name in marked))
    problems = []
    for (name, _), holders in groups.items():
        unmarked = [file for file, is_marked in holders if not is_marked]
        if len(holders) > 1 and len(unmarked) > 1:
            problems.append(f"{name} is the same in {', '.join(unmarked)} with no `# copied from` marker on the copies")
    return problems


def project_copy_problems(repo_root: Path) -> list[str]:
    """Every drifted or unmarked copy among the project's own scripts in `repo_root`/algos/."""
    paths = [repo_root / "algos" / name for name in PROJECT_SCRIPTS]
    return [problem for path in paths for problem in drifted_copies(path, repo_root)] + unmarked_copies(paths)
