"""The level searches (`envs.levels.shortest_path_length` and `optimal_steps`) timed side by side across versions of
envs/levels.py, on this machine's default device: each `--revisions` entry is a git revision whose envs/levels.py
is loaded beside the others (`worktree`: the file as it is now), and all of them time the same levels in one process,
so this machine's drift between runs does not enter the comparison.

Each measurement jits one search vmapped over `--levels` DR levels of a size (walls on `--wall-fraction` of the
cells, as DR's 60 of 169 at 13x13), compiles it apart, then takes the median of `--repeats` calls after
`block_until_ready`. `optimal_steps` is timed as the replay scripts' true regret calls it, with the step limit
`--max-steps-per-cell` x size^2 (versions without a limit search the whole maze). One JSON line per measurement,
then a table.

    python benchmarks/speed/bench_search.py --revisions 50ba59c^ fd0e500 worktree   # before, fixed-bound, now
"""

import importlib.util
import inspect
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import tyro

# SCAFFOLDING: make `benchmarks`, `envs` and `common` importable when run as a script.
REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.speed.tables import markdown_table  # noqa: E402
from common.provenance import describe_environment  # noqa: E402
from envs.levels import sample_dr_level  # noqa: E402


@dataclass(frozen=True)
class Args:
    revisions: tuple[str, ...] = ("worktree",)
    """Versions of envs/levels.py to time: git revisions, or `worktree` for the file as it is now."""
    sizes: tuple[int, ...] = (7, 13, 25, 51, 101)
    """Maze interiors (size x size)."""
    levels: int = 32
    """Levels per vmapped call (a seed's envs at the paper's 32)."""
    wall_fraction: float = 60 / 169
    """Share of the cells that are walls."""
    max_steps_per_cell: float = 250 / 169
    """`optimal_steps`'s limit per cell of the maze (the paper's 250 steps at 13x13)."""
    repeats: int = 5
    """Timed calls per measurement; the median is reported."""


def levels_module(revision: str, index: int):
    """envs/levels.py at `revision`, loaded as a module of its own (its imports are today's)."""
    if revision == "worktree":
        source = (REPO_ROOT / "envs" / "levels.py").read_text()
    else:
        source = subprocess.run(
            ["git", "show", f"{revision}:envs/levels.py"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout
    spec = importlib.util.spec_from_loader(f"levels_version_{index}", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"envs/levels.py@{revision}", "exec"), module.__dict__)
    return module


def searches(module, limit: int) -> dict:
    def optimal_steps(level):
        if "limit" in inspect.signature(module.optimal_steps).parameters:
            return module.optimal_steps(level, limit=limit)
        steps = module.optimal_steps(level)  # a version that searched the whole maze, cut at the limit after
        return jnp.where(steps <= limit, steps, -1)

    return {"shortest_path_length": module.shortest_path_length, "optimal_steps": optimal_steps}


def time_search(search, levels, repeats: int) -> tuple[float, float, jax.Array]:
    function = jax.jit(jax.vmap(search))
    started = time.perf_counter()
    compiled = function.lower(levels).compile()
    compile_s = time.perf_counter() - started
    result = compiled(levels).block_until_ready()
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        compiled(levels).block_until_ready()
        seconds.append(time.perf_counter() - started)
    return compile_s, statistics.median(seconds), result


def main(args: Args) -> None:
    environment = describe_environment()
    modules = {revision: levels_module(revision, index) for index, revision in enumerate(args.revisions)}
    rows = []
    for size in args.sizes:
        walls = round(args.wall_fraction * size * size)
        limit = round(args.max_steps_per_cell * size * size)
        rngs = jax.random.split(jax.random.key(size), args.levels)
        levels = jax.vmap(lambda rng, walls=walls, size=size: sample_dr_level(rng, size, size, walls))(rngs)
        for name in ("shortest_path_length", "optimal_steps"):
            answers = {}
            for revision, module in modules.items():
                compile_s, call_s, answers[revision] = time_search(searches(module, limit)[name], levels, args.repeats)
                record = {"search": name, "size": size, "walls": walls, "levels": args.levels, "limit": limit}
                record |= {"revision": revision, "compile_s": round(compile_s, 3), "call_s": call_s}
                record |= {"same_answers_as_first": bool((answers[revision] == answers[args.revisions[0]]).all())}
                print(json.dumps(record | {"environment": environment}), flush=True)
                rows.append(record)
    header = ["search", "size", *(f"{revision} (ms)" for revision in args.revisions), "answers agree"]
    table = []
    for size in args.sizes:
        for name in ("shortest_path_length", "optimal_steps"):
            cells = [row for row in rows if row["size"] == size and row["search"] == name]
            table.append([name, size, *(f"{row['call_s'] * 1e3:.2f}" for row in cells)])
            table[-1].append("yes" if all(row["same_answers_as_first"] for row in cells) else "no")
    print(markdown_table(header, table))


if __name__ == "__main__":
    main(tyro.cli(Args))
