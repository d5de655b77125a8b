"""The benchmark harness: result fields, the scaling sweep, the minimax side-by-side plumbing, the SFL refresh
timer. Timings are never asserted; the real minimax worker runs only where its virtual environment exists."""

import json
import math
import stat
import subprocess
import sys
from pathlib import Path

import pytest

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
    stdout = run_script("benchmarks/speed/bench_algos.py", "--algos", "plr", "--num-envs", "2", "4", *TINY).stdout
    results = json_lines(stdout)
    assert [(r["algo"], r["num_envs"], r["num_seeds"]) for r in results] == [("plr", 2, 1), ("plr", 4, 1)]
    for result in results:
        assert REQUIRED_FIELDS <= result.keys()
        assert {"device", "jax", "commit"} <= result.keys()
        assert result["config"]["num_envs"] == result["num_envs"] and result["config"]["lstm_size"] == 8
        per_update = result["num_envs"] * 4 / result["steady_s_per_update"]
        assert result["env_steps_per_s"] == pytest.approx(per_update, rel=0.05)  # s/update is rounded


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
