"""The benchmark harness: the env timer the env benchmarks share, result fields, the scaling sweep, the minimax
side-by-side plumbing, the SFL refresh timer, the commits timed in turns. Measured timings are never asserted (only
the env timer's, on a function that sleeps known times); the real minimax worker runs only where its virtual
environment exists."""

import ast
import json
import math
import stat
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.speed import env_timing
from tests.conftest import environment_with_fusion_emitters

REPO_ROOT = Path(__file__).resolve().parents[1]

REQUIRED_FIELDS = {"algo", "num_envs", "num_steps", "num_seeds", "compile_s", "steady_s_per_update", "env_steps_per_s"}
TINY = ["--num-steps", "4", "--repeats", "1", "--updates-per-call", "1", "--set", "lstm_size=8"]


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True)


def json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.fixture
def fake_minimax_venv(tmp_path):
    """A stand-in for the minimax venv whose Python prints one worker result, so the side-by-side
    table can be checked without installing minimax's stack."""
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    result = {"algo": "minimax:plr", "num_envs": 2, "num_steps": 4, "num_seeds": 1, "compile_s": 1.0}
    result |= {"steady_s_per_update": 0.5, "env_steps_per_s": 16}
    python.write_text(f"#!/bin/sh\necho '{json.dumps(result)}'\n")
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return python.parents[1]


@pytest.mark.slow
def test_bench_algos_sweep_reports_every_setting_with_provenance():
    args = ("--algos", "plr", "--num-envs", "2", "4", *TINY, "--repeats", "3")  # three calls: a range to report
    results = json_lines(run_script("benchmarks/speed/bench_algos.py", *args).stdout)
    assert [(r["algo"], r["num_envs"], r["num_seeds"]) for r in results] == [("plr", 2, 1), ("plr", 4, 1)]
    for result in results:
        assert REQUIRED_FIELDS <= result.keys()
        assert {"device", "jax", "commit"} <= result.keys()
        assert result["config"]["num_envs"] == result["num_envs"] and result["config"]["lstm_size"] == 8
        per_update = result["num_envs"] * 4 / result["steady_s_per_update"]
        assert result["env_steps_per_s"] == pytest.approx(per_update, rel=0.05)  # s/update is rounded
        fastest, slowest = result["s_per_update_range"]
        assert 0 < fastest <= result["steady_s_per_update"] <= slowest


@pytest.mark.slow
def test_side_by_side_speedup_is_ours_per_seed_over_minimax(fake_minimax_venv):
    stdout = run_script(
        "benchmarks/speed/bench_algos.py",
        *("--algos", "plr", "--num-envs", "2", "--num-seeds", "2", *TINY),
        *("--minimax", "--minimax-venv", str(fake_minimax_venv)),
    ).stdout
    ours, theirs = json_lines(stdout)
    assert theirs["algo"] == "minimax:plr"
    row = next(line for line in stdout.splitlines() if line.startswith("| plr (2 envs, 2 seeds)"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[3] == f"{ours['env_steps_per_s'] / 2 / 16:.2f}x"


@pytest.mark.slow
def test_bench_search_times_each_version_on_the_same_levels_and_compares_their_answers():
    """HEAD's envs/levels.py and the file as it is, side by side: a row per search, size and version, each with its
    answers checked against the first version's."""
    stdout = run_script(
        "benchmarks/speed/bench_search.py",
        "--revisions",
        "HEAD",
        "worktree",
        "--sizes",
        "5",
        "--levels",
        "4",
        "--repeats",
        "1",
    ).stdout
    results = json_lines(stdout)
    assert [(r["search"], r["revision"]) for r in results] == [
        (search, revision) for search in ("shortest_path_length", "optimal_steps") for revision in ("HEAD", "worktree")
    ]
    assert all(r["same_answers_as_first"] and r["call_s"] > 0 and r["limit"] == 37 for r in results)
    assert "| optimal_steps | 5 |" in stdout


@pytest.mark.slow
def test_bench_env_reports_throughput():
    stdout = run_script(
        "benchmarks/speed/bench_env.py", "--num-envs", "4", "8", "--num-steps", "8", "--repeats", "1"
    ).stdout
    results = json_lines(stdout)
    assert [r["num_envs"] for r in results] == [4, 8]
    assert all(r["env_steps_per_s"] > 0 and r["impl"] == "cleanued" for r in results)


def test_bench_env_minimax_needs_the_shipped_maze():
    result = subprocess.run(
        [sys.executable, "benchmarks/speed/bench_env.py", "--size", "7", "--minimax"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0 and "--size 13 --n-walls 60" in result.stderr


SLEEP_S = {0: 0.5, 1: 0.3, 2: 0.0, 3: 0.1}
"""Seconds each call of the timed stand-in sleeps, by the seed of its key: the warm-up call (seed 0) the longest."""


def sleeping_rollout(calls: list[int]):
    """A jitted function of one key that records its key's seed on the host, sleeps SLEEP_S[seed] there and returns
    the seed: the timer waits for it only through `block_until_ready`."""

    def host(seed):
        calls.append(int(seed))
        time.sleep(SLEEP_S[int(seed)])
        return np.asarray(seed, np.uint32)

    def rollout(key):
        seed = jax.random.key_data(key)[-1]
        return jax.pure_callback(host, jax.ShapeDtypeStruct((), jnp.uint32), seed)

    return jax.jit(rollout)


@pytest.mark.parametrize("make_key", [jax.random.key, jax.random.PRNGKey], ids=["typed key", "raw key"])
def test_env_timer_compiles_apart_warms_up_once_and_reports_the_median_timed_call(make_key):
    calls = []
    timing = env_timing.time_rollout(sleeping_rollout(calls), make_key, repeats=3)
    assert calls == [0, 1, 2, 3]  # compiling runs nothing; one warm-up call on seed 0, then seeds 1..repeats
    assert [int(output) for output in timing.outputs] == [1, 2, 3]
    assert 0 < timing.compile_s
    assert SLEEP_S[3] <= timing.steady_s < SLEEP_S[1]  # the median call, the warm-up left out


def test_env_timer_reports_the_fields_the_tables_read():
    timing = env_timing.Timing(compile_s=1.23456, steady_s=0.123456, outputs=[])
    assert timing.report(num_envs=4, num_steps=8) == {
        "num_envs": 4,
        "num_steps": 8,
        "compile_s": 1.235,
        "steady_s": 0.1235,
        "env_steps_per_s": round(32 / 0.123456),
    }


ENV_WORKERS = ("minimax_env_worker.py", "jaxued_env_worker.py", "gridworlds_env_worker.py")


def imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module.split(".")[0])
    return modules


def test_env_timer_and_the_peer_env_workers_import_nothing_of_the_project():
    """They run with a peer's own Python and jax (minimax's 0.4.31): the timer imports jax and the standard library
    only, each worker those, its peer's packages, its own folder's modules and the timer (benchmarks/speed)."""
    peers = REPO_ROOT / "benchmarks" / "peers"
    assert imported_modules(REPO_ROOT / "benchmarks" / "speed" / "env_timing.py") - set(sys.stdlib_module_names) == {
        "jax"
    }
    project = {"algos", "benchmarks", "common", "envs", "tests"}
    for worker in ENV_WORKERS:
        modules = imported_modules(peers / worker)
        assert "env_timing" in modules and not modules & project, worker


MINIMAX_PYTHON = REPO_ROOT / "benchmarks" / ".minimax-venv" / "bin" / "python"


@pytest.mark.slow
@pytest.mark.skipif(not MINIMAX_PYTHON.exists(), reason="minimax venv absent (bench_algos.py --minimax creates it)")
def test_minimax_worker_mixes_replay_and_new_level_updates():
    result = subprocess.run(
        [str(MINIMAX_PYTHON), "benchmarks/peers/minimax_worker.py", "--config", "accel", "--num-envs", "4"]
        + ["--num-steps", "8", "--repeats", "1"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=environment_with_fusion_emitters(),
    )
    (worker,) = json_lines(result.stdout)
    by_prob = worker["s_per_update_by_replay_prob"]
    assert worker["replay_prob"] == 0.8 and set(by_prob) == {"1.0", "0.0"}
    expected = 0.8 * by_prob["1.0"] + 0.2 * by_prob["0.0"]
    assert worker["steady_s_per_update"] == pytest.approx(expected, abs=2e-4)
    assert worker["env_steps_per_update"] == pytest.approx(4 * 8 * 1.8)  # replays also play the mutants


@pytest.mark.slow
def test_sfl_refresh_timer_reports_the_scoring_time():
    result = run_script(
        "benchmarks/speed/bench_sfl.py",
        "--score-batch-size",
        "8",
        "--score-steps",
        "16",
        "--max-steps",
        "16",
        "--lstm-size",
        "8",
    )
    line = json.loads(result.stdout.strip().splitlines()[-1])
    assert line["bench"] == "sfl_refresh" and line["scoring_env_steps"] == 8 * 16
    assert math.isfinite(line["scoring_seconds"]) and "commit" in line and "device" in line


def test_the_speed_benchmarks_import_nothing_from_the_floor_above():
    """benchmarks/peers builds on benchmarks/speed (AMaze's own timings, the env timer, the tables), never the other
    way round."""
    for path in (REPO_ROOT / "benchmarks" / "speed").glob("*.py"):
        assert not any(module.startswith("benchmarks.peers") for module in full_imports(path)), path.name


def full_imports(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
    return modules


def test_bench_commits_rotates_the_commits_each_round_and_divides_each_median_by_the_first_commits(
    monkeypatch, capsys, tmp_path
):
    """Which commit is timed when (A B C, then B C A, then C A B: the machine's drift spread over all of them) and the
    table's medians and ratios, from measurements the test makes up. Fails with the turn not rotating or the ratio
    taken against another commit."""
    from benchmarks.speed import bench_commits

    hashes = {"old": "a" * 40, "mid": "b" * 40, "new": "c" * 40}
    seconds = {"a" * 12: [1.0, 3.0, 2.0], "b" * 12: [2.0, 2.0, 9.0], "c" * 12: [4.0, 1.0, 1.5]}
    order = []

    def fake_measure(tree, algo, bench_flags):
        order.append((algo, tree.name))
        return {
            "algo": algo,
            "steady_s_per_update": seconds[tree.name][sum(name == tree.name for _, name in order) - 1],
        }

    monkeypatch.setattr(bench_commits, "worktree", lambda commit, work: (hashes[commit], work / hashes[commit][:12]))
    monkeypatch.setattr(bench_commits, "measure", fake_measure)
    bench_commits.main(bench_commits.Args(commits=("old", "mid", "new"), algos=("dr",), rounds=3, work=tmp_path))
    assert [name[0] for _, name in order] == list("abc" + "bca" + "cab")
    table = capsys.readouterr().out.split("| method")[1]
    assert "| dr | old (aaaaaaa) | 1.0000 / 3.0000 / 2.0000 | 2.0 | 1.000 |" in table
    assert "| dr | mid (bbbbbbb) | 2.0000 / 2.0000 / 9.0000 | 2.0 | 1.000 |" in table
    assert "| dr | new (ccccccc) | 4.0000 / 1.0000 / 1.5000 | 1.5 | 0.750 |" in table


def test_bench_commits_checks_each_commit_out_once_and_refuses_what_is_not_a_commit(tmp_path, monkeypatch):
    """In a clone of this repository: a commit's worktree is made once and found again, its bench_algos.py is where
    its layout keeps it, and a name that is no commit is refused in one line."""
    from benchmarks.speed import bench_commits

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(REPO_ROOT), str(clone)], check=True)
    monkeypatch.setattr(bench_commits, "REPO_ROOT", clone)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True).stdout.strip()
    full_hash, tree = bench_commits.worktree("HEAD", tmp_path / "work")
    assert full_hash == head and tree == tmp_path / "work" / head[:12]
    assert bench_commits.bench_script(tree) == tree / "benchmarks" / "speed" / "bench_algos.py"
    assert bench_commits.worktree(head[:7], tmp_path / "work") == (full_hash, tree)
    with pytest.raises(SystemExit, match="error: 'no-such-commit' is not a commit of this repository"):
        bench_commits.worktree("no-such-commit", tmp_path / "work")
