"""The peer benchmark harness (JaxUED, NAVIX, XLand-MiniGrid): the replay-mix arithmetic, the tables (cells, alignment,
ratios and the JSON lines read back, benchmarks/speed/tables.py), the JaxUED worker's capture of an example script, and
the side-by-side plumbing with stand-in virtual environments. Timings are never asserted; the real peers run only where
their virtual environments (and for JaxUED's scripts, a checkout named by JAXUED_REPO) exist, which CI does not
create."""

import json
import os
import random
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.peers.jaxued_worker import mixed_seconds_per_update
from benchmarks.speed.tables import json_lines as table_json_lines
from benchmarks.speed.tables import markdown_table, ratio
from tests.conftest import environment_with_fusion_emitters

REPO_ROOT = Path(__file__).resolve().parents[1]

JAXUED_PYTHON = REPO_ROOT / "benchmarks" / ".jaxued-venv" / "bin" / "python"
GRIDWORLDS_PYTHON = REPO_ROOT / "benchmarks" / ".gridworlds-venv" / "bin" / "python"


def run(*command: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, **kwargs)


def json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def table_row(stdout: str, first_cell: str) -> list[str]:
    row = next(line for line in stdout.splitlines() if line.startswith(f"| {first_cell} |"))
    return [cell.strip() for cell in row.strip("|").split("|")]


def test_plr_mix_weighs_replay_and_new_level_updates_by_the_replay_probability():
    assert mixed_seconds_per_update(0.5, 3.0, 1.0, mutates_after_replay=False) == pytest.approx(2.0)
    assert mixed_seconds_per_update(1.0, 3.0, 1.0, mutates_after_replay=False) == pytest.approx(3.0)


def test_accel_mix_matches_a_simulated_run_of_its_branch_sequence():
    # JaxUED's ACCEL: a decision replays with probability p (then a mutation update follows) or plays new levels.
    # Forced p = 1 alternates replay and mutation, so the measured per-update time there is their mean.
    p, s_replay, s_mutate, s_new = 0.8, 5.0, 1.0, 2.0
    draw = random.Random(0)
    seconds = updates = 0
    for _ in range(200_000):
        if draw.random() < p:
            seconds, updates = seconds + s_replay + s_mutate, updates + 2
        else:
            seconds, updates = seconds + s_new, updates + 1
    mixed = mixed_seconds_per_update(p, (s_replay + s_mutate) / 2, s_new, mutates_after_replay=True)
    assert mixed == pytest.approx(seconds / updates, rel=5e-3)


def test_markdown_table_aligns_numbers_right_and_groups_thousands():
    table = markdown_table(["algo", "steps/s", "ratio"], [["dr", 14004, "3.44x"], ["plr", None, "-"]])
    assert table.splitlines() == [
        "| algo | steps/s | ratio |",
        "|---|---:|---|",
        "| dr | 14,004 | 3.44x |",
        "| plr | - | - |",
    ]


def test_markdown_table_shows_booleans_and_floats_as_written_and_aligns_a_mixed_column_left():
    """A boolean is a word, not the 1 or 0 of its int; a float as Python writes it; an int's thousands grouped from
    1,000 up, negative ones too; a column with a text cell among numbers is text. Mutation checked by hand: dropping
    the boolean case (True as "1") fails this test."""
    rows = [["dr", True, 0.25, 999, -1234, 5], ["plr", False, 1.5, 1000, 1234567, "n/a"]]
    assert markdown_table(["algo", "replays", "s", "a", "b", "c"], rows).splitlines() == [
        "| algo | replays | s | a | b | c |",
        "|---|---:|---:|---:|---:|---|",
        "| dr | True | 0.25 | 999 | -1,234 | 5 |",
        "| plr | False | 1.5 | 1,000 | 1,234,567 | n/a |",
    ]


def test_ratio_is_ours_over_theirs_to_two_places_or_a_dash_without_theirs():
    assert [ratio(3, 2), ratio(1, 3), ratio(2, 2.0)] == ["1.50x", "0.33x", "1.00x"]
    assert ratio(3, None) == ratio(3, 0) == "-"


def test_json_lines_reads_the_lines_that_open_an_object_and_nothing_else():
    stdout = '{"a": 1}\n| table | {"b": 2} |\ncompiling {\n {"indented": true}\n{"c": [1, 2]}\n'
    assert table_json_lines(stdout) == [{"a": 1}, {"c": [1, 2]}]


FAKE_EXAMPLE = """
import argparse

import jax
import jax.numpy as jnp
import wandb


def main(config=None, project="x"):
    wandb.init(config=config, project=project)
    config = wandb.config

    def train_step(carry, _):
        rng, state = carry
        return (rng, {"count": state["count"] + jnp.int32(1), "w": state["w"] * config["scale"]}), {}

    @jax.jit
    def train_and_eval_step(runner_state, _):
        return jax.lax.scan(train_step, runner_state, None, config["eval_freq"])

    runner_state = (jax.random.PRNGKey(0), {"count": 0, "w": jnp.ones(3)})
    for _ in range(2):
        runner_state, _ = train_and_eval_step(runner_state, None)
    raise AssertionError("the worker stops main at its first train_and_eval_step")


if __name__=="__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n_walls", type=int, default=25)
    parser.add_argument("--checkpoint_save_interval", type=int, default=2)
    parser.add_argument("--eval_freq", type=int, default=250)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--num_train_envs", type=int, default=3)
    parser.add_argument("--num_steps", type=int, default=5)
    config = vars(parser.parse_args())
    main(config, project="p")
"""


def test_jaxued_worker_times_the_scripts_own_train_step_with_its_cli_config(tmp_path):
    """A stand-in for examples/maze_dr.py with the same shape: the worker builds the config with the script's own
    argument parser, stops `main` at its first train_and_eval_step, and times the captured train_step. The script's
    counter starts as a Python int (weakly typed) and comes back strongly typed, so a second compile is reported."""
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "maze_dr.py").write_text(FAKE_EXAMPLE)
    result = run(
        sys.executable,
        "benchmarks/peers/jaxued_worker.py",
        *("--repo", str(tmp_path), "--method", "dr", "--repeats", "1", "--flags", "--scale", "2"),
        check=True,
    )
    (line,) = json_lines(result.stdout)
    assert line["config"]["n_walls"] == 60 and line["config"]["checkpoint_save_interval"] == 0
    assert line["config"]["scale"] == 2 and line["config"]["eval_freq"] == 250
    assert line["env_steps_per_update"] == 3 * 5 and line["compile_s_second_call"] > 0
    assert line["compile_s"] == pytest.approx(line["compile_s_first_call"] + line["compile_s_second_call"], abs=0.02)


def fake_venv(tmp_path: Path, name: str, lines: list[dict]) -> Path:
    """A stand-in virtual environment whose Python prints the given worker results, whatever it is asked."""
    python = tmp_path / name / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n" + "".join(f"echo '{json.dumps(line)}'\n" for line in lines))
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return python.parents[1]


def test_env_side_by_side_divides_ours_by_jaxueds_steps_per_second(tmp_path):
    jaxued = {"bench": "env", "impl": "jaxued", "num_envs": 4, "compile_s": 1.0, "env_steps_per_s": 16}
    venv = fake_venv(tmp_path, "jaxued", [jaxued])
    result = run(
        sys.executable,
        "benchmarks/peers/bench_jaxued.py",
        *("--part", "env", "--num-envs", "4", "--num-steps", "8", "--repeats", "1", "--wrappers", "restart"),
        *("--jaxued-venv", str(venv)),
        check=True,
    )
    ours, theirs = json_lines(result.stdout)
    assert ours["impl"] == "cleanued" and theirs == jaxued
    cells = table_row(result.stdout, "restart")
    assert cells[3] == "16" and cells[5] == f"{ours['env_steps_per_s'] / 16:.2f}x" and cells[4] == "-"


def test_training_side_by_side_needs_a_jaxued_checkout():
    result = run(sys.executable, "benchmarks/peers/bench_jaxued.py", "--part", "train")
    assert result.returncode != 0 and "--jaxued-repo" in result.stderr


def test_gridworlds_table_compares_the_empty_amaze_room_with_each_peer(tmp_path):
    peer = {"bench": "env", "impl": "navix", "num_envs": 4, "compile_s": 1.0, "env_steps_per_s": 32}
    venv = fake_venv(tmp_path, "gridworlds", [peer])
    result = run(
        sys.executable,
        "benchmarks/peers/bench_gridworlds.py",
        *("--num-envs", "4", "--num-steps", "8", "--repeats", "1", "--peers", "navix", "--venv", str(venv)),
        check=True,
    )
    walls, empty, navix = json_lines(result.stdout)
    assert (walls["config"]["n_walls"], empty["config"]["n_walls"]) == (60, 0) and navix == peer
    cells = table_row(result.stdout, "4")
    assert cells[3] == "32" and cells[4] == f"{empty['env_steps_per_s'] / 32:.2f}x"


@pytest.mark.skipif(not JAXUED_PYTHON.exists(), reason="JaxUED venv absent (bench_jaxued.py creates it)")
def test_jaxued_env_worker_runs_the_wheels_maze():
    result = run(
        str(JAXUED_PYTHON),
        "benchmarks/peers/jaxued_env_worker.py",
        *("--num-envs", "2", "--num-steps", "4", "--repeats", "1"),
        check=True,
        env=environment_with_fusion_emitters(),
    )
    (line,) = json_lines(result.stdout)
    assert line["impl"] == "jaxued" and line["versions"]["jaxued"] == "0.0.1" and line["env_steps_per_s"] > 0


@pytest.mark.skipif(
    not (JAXUED_PYTHON.exists() and os.environ.get("JAXUED_REPO")),
    reason="needs the JaxUED venv and JAXUED_REPO, a checkout of github.com/DramaCow/jaxued",
)
def test_jaxued_worker_forces_each_plr_branch():
    result = run(
        str(JAXUED_PYTHON),
        "benchmarks/peers/jaxued_worker.py",
        *("--repo", os.environ["JAXUED_REPO"], "--method", "plr", "--repeats", "1"),
        *("--flags", "--num_steps", "4", "--num_train_envs", "2"),
        check=True,
        env=environment_with_fusion_emitters(),
    )
    (line,) = json_lines(result.stdout)
    assert line["branches_by_replay_prob"] == {
        "1.0": {"dr": 0, "replay": 4, "mutation": 0},
        "0.0": {"dr": 4, "replay": 0, "mutation": 0},
    }


@pytest.mark.skipif(not GRIDWORLDS_PYTHON.exists(), reason="gridworlds venv absent (bench_gridworlds.py creates it)")
@pytest.mark.parametrize("peer", ["navix", "xminigrid"])
def test_gridworld_worker_runs_each_peer(peer):
    result = run(
        str(GRIDWORLDS_PYTHON),
        "benchmarks/peers/gridworlds_env_worker.py",
        *("--peer", peer, "--num-envs", "2", "--num-steps", "4", "--repeats", "1"),
        check=True,
    )
    (line,) = json_lines(result.stdout)
    assert line["impl"] == peer and line["grid"] == 15 and line["env_steps_per_s"] > 0
