"""The DR level generator of cleanued beside minimax-lib 0.2.0's: the same distribution of levels?

Both libraries draw new levels the same way by reading (walls uniform with replacement, then the agent on a free cell,
a uniform direction, the goal on another free cell), but their random streams differ, so only the distributions can
be compared. This draws `--levels` levels from each at every configuration, minimax's with its own `Maze.reset_env`
in its venv (benchmarks/learning/minimax_levels.py), and measures both with the same code (cleanued's breadth-first
search): wall count, solvable share, shortest path (grid moves, solvable levels), agent-goal Manhattan distance,
start direction, and the agent's and the goal's cell. Each statistic's two histograms are compared by a chi-square
test of homogeneity (bins with fewer than 10 levels on both sides pooled), and a statistic is flagged where its p is
below 0.01 divided by the number of tests (Bonferroni over statistics and configurations).

    python benchmarks/learning/generator_comparison.py --configurations 7:8 11:30 13:60 --levels 100000
"""

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import tyro
from scipy import stats

# SCAFFOLDING: put the repo root on sys.path so the script runs as `python benchmarks/learning/generator_comparison.py`.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import jax  # noqa: E402

from common.config import AT_LEAST_ONE  # noqa: E402
from common.errors import ConfigError  # noqa: E402
from common.provenance import describe_environment  # noqa: E402
from common.runs import one_line_errors  # noqa: E402
from envs.levels import sample_dr_level, shortest_path_length  # noqa: E402
from envs.maze import Level  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
FAMILY_ALPHA = 0.01
"""Chance of one false flag over all the tests of a comparison when the generators are the same."""
MIN_BIN = 10
"""Levels a histogram bin needs on both sides together to stand alone in the chi-square test."""
CHUNK = 10_000
"""Levels measured per jitted call."""
STATISTICS = ("walls", "solvable", "shortest_path", "agent_goal_distance", "agent_dir", "agent_cell", "goal_cell")


@dataclass(frozen=True)
class Args:
    configurations: tuple[str, ...] = ("7:8", "11:30", "13:60")
    """Configurations as SIZE:WALLS (the interior's side and the walls drawn)."""
    levels: Annotated[int, AT_LEAST_ONE] = 100_000
    """Levels drawn from each library per configuration."""
    seed: int = 0
    """Seed of both libraries' draws."""
    out: Path | None = None
    """Also write the table (.md) and one JSON line per statistic (.jsonl) here, with versions and commit."""
    minimax_venv: Path = REPO_ROOT / "benchmarks" / ".minimax-venv"
    """Virtual environment with minimax-lib 0.2.0 (benchmarks/speed/bench_algos.py creates it)."""


def parse_configuration(text: str) -> tuple[int, int]:
    size, colon, walls = text.partition(":")
    if not colon or not size.isdigit() or not walls.isdigit() or int(size) < 2:
        raise ConfigError(f"--configurations {text!r}: give SIZE:WALLS, e.g. 13:60")
    if int(walls) > int(size) ** 2 - 2:
        raise ConfigError(f"--configurations {text}: {walls} walls leave no two free cells in a {size}x{size} maze")
    return int(size), int(walls)


def cleanued_levels(size: int, n_walls: int, count: int, seed: int, generator=sample_dr_level) -> dict:
    """`count` levels of `generator` (cleanued's DR generator by default) as the arrays minimax_levels.py writes."""
    draw = jax.jit(jax.vmap(lambda key: generator(key, size, size, n_walls)))
    keys = jax.random.split(jax.random.key(seed), count)
    parts = [draw(keys[start : start + CHUNK]) for start in range(0, count, CHUNK)]
    return {
        "walls": np.concatenate([np.asarray(level.wall_map) for level in parts]).reshape(count, size, size),
        "agent_pos": np.concatenate([np.asarray(level.agent_pos) for level in parts]),
        "goal_pos": np.concatenate([np.asarray(level.goal_pos) for level in parts]),
        "agent_dir": np.concatenate([np.asarray(level.agent_dir) for level in parts]),
    }


def minimax_levels(size: int, n_walls: int, count: int, seed: int, venv: Path) -> dict:
    python = venv / "bin" / "python"
    if not python.exists():
        raise ConfigError(f"no minimax venv at {venv} (create it with benchmarks/speed/bench_algos.py --minimax)")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "levels.npz"
        worker = REPO_ROOT / "benchmarks" / "learning" / "minimax_levels.py"
        flags = ["--size", str(size), "--n-walls", str(n_walls), "--count", str(count), "--seed", str(seed)]
        subprocess.run([str(python), str(worker), *flags, "--out", str(path)], check=True)
        with np.load(path) as data:
            walls = np.unpackbits(data["walls"], axis=1, count=size * size).astype(bool).reshape(count, size, size)
            return {"walls": walls, **{key: data[key] for key in ("agent_pos", "goal_pos", "agent_dir")}}


def level_statistics(levels: dict) -> dict:
    """Per level, each of `STATISTICS` as an integer array (shortest path -1 where unsolvable), measured by
    cleanued's code whichever library drew the levels."""
    walls, agent, goal = levels["walls"], np.asarray(levels["agent_pos"]), np.asarray(levels["goal_pos"])
    count, _, width = walls.shape
    as_levels = Level(
        wall_map=walls, goal_pos=goal.astype(np.int32), agent_pos=agent.astype(np.int32), agent_dir=levels["agent_dir"]
    )
    search = jax.jit(jax.vmap(shortest_path_length))
    chunks = [slice(start, start + CHUNK) for start in range(0, count, CHUNK)]
    lengths = np.concatenate([np.asarray(search(jax.tree.map(lambda x, s=part: x[s], as_levels))) for part in chunks])
    return {
        "walls": walls.reshape(count, -1).sum(1),
        "solvable": (lengths >= 0).astype(np.int64),
        "shortest_path": lengths,
        "agent_goal_distance": np.abs(agent - goal).sum(1),
        "agent_dir": np.asarray(levels["agent_dir"]).astype(np.int64),
        "agent_cell": agent[:, 1] * width + agent[:, 0],
        "goal_cell": goal[:, 1] * width + goal[:, 0],
    }


def homogeneity_p(a: np.ndarray, b: np.ndarray) -> float:
    """Chi-square test that two samples of an integer statistic come from one distribution: p-value (see
    `counts_homogeneity_p`)."""
    table = {}
    for side, sample in enumerate((a, b)):
        for value, count in zip(*(x.tolist() for x in np.unique(sample, return_counts=True)), strict=True):
            table.setdefault(value, [0, 0])[side] = count
    return counts_homogeneity_p(list(table.values()))


def counts_homogeneity_p(table: list[list[int]]) -> float:
    """Chi-square test of homogeneity of two histograms, given as one [count in a, count in b] per value: p-value.
    Values seen fewer than `MIN_BIN` times in both together share one bin; one bin in all means nothing differs."""
    kept = [counts for counts in table if sum(counts) >= MIN_BIN]
    rare = [sum(counts[side] for counts in table if sum(counts) < MIN_BIN) for side in (0, 1)]
    rows = kept + ([rare] if sum(rare) else [])
    if len(rows) < 2:
        return 1.0
    return float(stats.chi2_contingency(np.array(rows).T, correction=False).pvalue)


def compare(cleanued: dict, minimax: dict, tests: int) -> list[dict]:
    """One row per statistic: each side's mean (for the solvable share: the share; for the shortest path: over
    solvable levels), the chi-square p and whether it is flagged at `FAMILY_ALPHA` / `tests`."""
    rows = []
    for name in STATISTICS:
        a, b = cleanued[name], minimax[name]
        if name == "shortest_path":
            a, b = a[a >= 0], b[b >= 0]
        p = homogeneity_p(a, b)
        rows.append(
            {
                "statistic": name,
                "cleanued_mean": float(a.mean()),
                "minimax_mean": float(b.mean()),
                "p": p,
                "flagged": p < FAMILY_ALPHA / tests,
            }
        )
    return rows


def markdown(results: dict, levels: int) -> str:
    lines = [
        f"{levels:,} levels a side per configuration; chi-square p of the two histograms, flagged (**) below "
        f"{FAMILY_ALPHA} / {sum(len(rows) for rows in results.values())} tests",
        "",
        "| configuration | statistic | cleanued mean | minimax mean | p |",
        "|---|---|---:|---:|---:|",
    ]
    for configuration, rows in results.items():
        for row in rows:
            p = f"**{row['p']:.3g}**" if row["flagged"] else f"{row['p']:.3g}"
            lines.append(
                f"| {configuration} | {row['statistic']} | {row['cleanued_mean']:.4f} | {row['minimax_mean']:.4f} | "
                f"{p} |"
            )
    return "\n".join(lines)


def write_results(out: Path, name: str, table: str, records: list[dict]) -> None:
    """`out`/`name`.md (the table) and `name`.jsonl (one record a line, each with versions and commit)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text(table + "\n")
    environment = describe_environment()
    with open(out / f"{name}.jsonl", "w") as file:
        for record in records:
            file.write(json.dumps(record | environment) + "\n")


def main(args: Args) -> None:
    configurations = [parse_configuration(text) for text in args.configurations]
    tests = len(configurations) * len(STATISTICS)
    results = {}
    for size, n_walls in configurations:
        sides = (
            level_statistics(cleanued_levels(size, n_walls, args.levels, args.seed)),
            level_statistics(minimax_levels(size, n_walls, args.levels, args.seed, args.minimax_venv)),
        )
        results[f"{size}x{size}, {n_walls} walls"] = compare(*sides, tests)
        print(f"compared {size}x{size} with {n_walls} walls", file=sys.stderr, flush=True)
    table = markdown(results, args.levels)
    print(table)
    if args.out is not None:
        records = [
            {"configuration": configuration, "levels": args.levels, **row}
            for configuration, rows in results.items()
            for row in rows
        ]
        write_results(args.out, "generator_comparison", table, records)


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Args, description=__doc__))
