"""Training speed of several commits side by side, to find which commits cost speed: each commit is checked out
as a git worktree under `--work`, and each tree's own bench_algos.py (benchmarks/speed/, or benchmarks/ in trees
from before the benchmarks were grouped) times its own scripts with the same flags. The commits take turns within
each round and method (A B C, then B C A, ...), so this machine's drift over minutes spreads over all of them
instead of landing on one. One JSON line per measurement (bench_algos's own, with the commit and round added),
then a table: per method, each commit's median seconds per update over the rounds and its ratio to the first.

    python benchmarks/speed/bench_commits.py --commits 4916ddc HEAD --algos dr accel --rounds 3 \\
        --bench-flags="--num-envs 32 --num-steps 256 --num-seeds 1 --repeats 5"
"""

import json
import shlex
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import tyro

# SCAFFOLDING: make `benchmarks`, `envs` and `common` importable when run as a script.
REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.speed.tables import json_lines, markdown_table  # noqa: E402

BENCH_PATHS = ("benchmarks/speed/bench_algos.py", "benchmarks/bench_algos.py")
"""Where a tree keeps bench_algos.py, newest layout first."""


@dataclass(frozen=True)
class Args:
    commits: tuple[str, ...]
    """Git revisions to compare; the first is the reference of the ratios."""
    algos: tuple[str, ...] = ("dr", "accel")
    """Methods to time (each tree's algos/<name>.py)."""
    rounds: int = 2
    """Measurements per commit and method; the commits' order rotates each round."""
    bench_flags: str = "--num-envs 32 --num-steps 256 --num-seeds 1"
    """Flags every tree's bench_algos.py gets (besides --algos)."""
    work: Path = Path("/tmp/bench_commits")
    """Folder for the worktrees (one per commit, reused when already there)."""


def worktree(commit: str, work: Path) -> tuple[str, Path]:
    """(the commit's full hash, a worktree of it under `work`)."""
    full = subprocess.run(
        ["git", "rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    if full.returncode != 0:
        raise SystemExit(f"error: {commit!r} is not a commit of this repository")
    full_hash = full.stdout.strip()
    tree = work / full_hash[:12]
    if not tree.exists():
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), full_hash], cwd=REPO_ROOT, check=True)
    return full_hash, tree


def bench_script(tree: Path) -> Path:
    for path in BENCH_PATHS:
        if (tree / path).exists():
            return tree / path
    raise SystemExit(f"error: {tree} has no bench_algos.py at {' or '.join(BENCH_PATHS)}")


def measure(tree: Path, algo: str, bench_flags: str) -> dict:
    argv = [sys.executable, str(bench_script(tree)), "--algos", algo, *shlex.split(bench_flags)]
    result = subprocess.run(argv, cwd=tree, capture_output=True, text=True)
    if result.returncode != 0:
        last_line = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"error: {tree.name} {algo} exited with {result.returncode}: {last_line}")
    return json_lines(result.stdout)[0]


def main(args: Args) -> None:
    args.work.mkdir(parents=True, exist_ok=True)
    trees = dict(worktree(commit, args.work) for commit in args.commits)
    hashes = list(trees)
    seconds = {(algo, full_hash): [] for algo in args.algos for full_hash in hashes}
    for round_index in range(args.rounds):
        for algo in args.algos:
            turn = round_index % len(hashes)
            for full_hash in hashes[turn:] + hashes[:turn]:
                record = measure(trees[full_hash], algo, args.bench_flags)
                seconds[algo, full_hash].append(record["steady_s_per_update"])
                print(json.dumps(record | {"tree_commit": full_hash, "round": round_index}), flush=True)
    rows = []
    for algo in args.algos:
        reference = statistics.median(seconds[algo, hashes[0]])
        for commit, full_hash in zip(args.commits, hashes, strict=True):
            runs = seconds[algo, full_hash]
            median = statistics.median(runs)
            rounds = " / ".join(f"{value:.4f}" for value in runs)
            rows.append([algo, f"{commit} ({full_hash[:7]})", rounds, round(median, 4), f"{median / reference:.3f}"])
    print(markdown_table(["method", "commit", "s / update, each round", "median", "vs first"], rows))


if __name__ == "__main__":
    main(tyro.cli(Args))
