"""The benchmark harness: the env timer the env benchmarks share, result fields, the scaling sweep, the minimax
side-by-side plumbing, the SFL refresh timer, the commits timed in turns; for bench_algos.py and bench_env.py also the
config handed to the measured program, the arithmetic from timed calls to the record (on a stand-in script and clock),
the reused-level count of real rollouts, and the tables. Measured timings are never asserted (only the env timer's, on
a function that sleeps known times); the real minimax worker runs only where its virtual environment exists."""

import ast
import functools
import json
import math
import stat
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from benchmarks.speed import bench_algos, bench_env, env_timing
from common import level_buffer
from common.config import with_flags
from common.errors import ConfigError
from envs.levels import sample_dr_level
from envs.maze import EnvParams, reset_to_fresh_levels
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


def fake_clock(*readings: float):
    """A stand-in for the `time` module whose perf_counter returns `readings` in turn (and fails past the last)."""
    readings = iter(readings)
    return SimpleNamespace(perf_counter=lambda: next(readings))


def echoing_venv(tmp_path: Path) -> Path:
    """A stand-in virtual environment whose Python prints a text line, then its arguments as one JSON line."""
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    script = f"#!{sys.executable}\nimport json, sys\nprint('compiling')\nprint(json.dumps({{'argv': sys.argv[1:]}}))\n"
    python.write_text(script)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return python.parents[1]


class Stop(Exception):
    """Raised by a stand-in to end a benchmark once what the test reads has been handed over."""


def test_bench_algos_hands_the_script_its_settings_and_every_override_parsed_as_json(monkeypatch):
    """The config measure builds (what `run_functions` gets): the sizes, one chunk of `--updates-per-call` updates
    that also ends the run, no evaluations or pictures, the sweep, and each `--set key=value` with its value read as
    JSON where it is JSON (split at the first "=" only); a key the script has no flag for is refused before anything
    is built. Mutation checked by hand: dropping the overrides or the checkpoint interval fails this test."""
    handed = []

    def capture(config, make_train, script):
        handed.append((config, script))
        raise Stop

    monkeypatch.setattr(bench_algos, "run_functions", capture)
    overrides = ("lstm_size=8", "exploratory_grad_updates=true", "lr=1e-3", "run_name=a=b", "wandb_project=x y")
    args = bench_algos.Args(num_steps=4, updates_per_call=3, num_devices=1, set=overrides, sweep=("gamma=0.9,0.99",))
    with pytest.raises(Stop):
        bench_algos.measure("plr", args, num_envs=2, num_seeds=5)
    ((config, script),) = handed
    assert script == "algos/plr.py"
    assert (config.ppo.num_envs, config.ppo.num_steps, config.run.num_seeds) == (2, 4, 5)
    assert config.ppo.lstm_size == 8 and config.exploratory_grad_updates is True and config.ppo.lr == 0.001
    assert config.run.run_name == "a=b" and config.run.wandb_project == "x y"
    assert (config.run.log_interval, config.run.total_updates, config.run.checkpoint_interval) == (3, 3, 3)
    assert (config.run.eval_interval, config.run.screenshot_interval) == (0, 0)
    assert config.run.sweep == ("gamma=0.9,0.99",) and config.run.devices.num_devices == 1
    with pytest.raises(ConfigError, match="has no --no-such-flag"):
        bench_algos.measure("plr", bench_algos.Args(set=("no_such_flag=1",)), num_envs=2, num_seeds=1)
    assert len(handed) == 1


@struct.dataclass
class ToyRunner:
    calls: jax.Array  # int32[entries]: chunks run so far
    buffer: level_buffer.LevelBuffer | None  # leaves [entries, capacity, ...]; None for a method without replay


TOY_POINTS, TOY_CAPACITY = 3, 4


def toy_functions(replay: bool):
    """Stand-ins for a script's init and chunk: init makes TOY_POINTS entries per seed (as a sweep does), with an empty
    level buffer for a `replay` method; the chunk counts its calls and, for a replay method, reports as replay fraction
    (calls so far)**2 / 100, so the fraction a record averages tells which calls it read."""

    def init(keys):
        entries = TOY_POINTS * keys.shape[0]
        if not replay:
            return ToyRunner(calls=jnp.zeros(entries, jnp.int32), buffer=None)
        level = sample_dr_level(jax.random.key(0), height=5, width=5, n_walls=3)
        buffer = level_buffer.empty_buffer(level, TOY_CAPACITY)
        buffer = jax.tree.map(lambda x: jnp.zeros((entries, *x.shape), x.dtype), buffer)
        return ToyRunner(calls=jnp.zeros(entries, jnp.int32), buffer=buffer)

    def step(runner):
        metrics = {"buffer/replay_fraction": runner.calls.astype(jnp.float32) ** 2 / 100} if replay else {}
        return runner.replace(calls=runner.calls + 1), metrics

    return SimpleNamespace(init=init, step=step)


class StandInPlacement:
    """A placement that reports the given devices and split, keeps the envs it was made for and every runner it is
    asked to place, and compiles with plain `jax.jit`."""

    def __init__(self, num_devices: int, shard_envs: bool):
        self.num_devices, self.shard_envs, self.placed, self.given = num_devices, shard_envs, [], []

    def place(self, runner):
        self.placed.append(runner)
        return runner

    def jit(self, function):
        return jax.jit(function)


@pytest.mark.parametrize(
    ("num_devices", "shard_envs", "sharded"), [(1, False, "-"), (2, False, "seeds"), (2, True, "envs")]
)
def test_bench_algos_times_the_compiled_chunk_after_one_warm_up_and_reports_per_update_figures(
    monkeypatch, num_devices, shard_envs, sharded
):
    """With a stand-in script and a clock that reads 100 and 107 around the compile, then timed calls of 4, 1 and 2 s
    of two updates each: compile 7 s, the median call per update 1 s (the mean would be 7/6), the range 0.5-2 s, env
    steps per second the script's 4 envs x 4 steps x 3 points x 2 seeds per second, the replay fraction the mean of
    the three timed calls (the warm-up's left out), the placement made for the envs of a seed and its split as it
    reports it, and the placed runner's level buffer full. Mutation checked by hand: skipping the warm-up call, one
    timed call more, the mean call, or the last call's fraction instead of the mean fails this test."""
    placement = StandInPlacement(num_devices, shard_envs)
    monkeypatch.setattr(bench_algos, "run_functions", lambda config, make_train, script: toy_functions(True))
    monkeypatch.setattr(
        bench_algos, "make_placement", lambda run, num_envs: placement.given.append(num_envs) or placement
    )
    monkeypatch.setattr(bench_algos, "time", fake_clock(100.0, 107.0, 200.0, 204.0, 300.0, 301.0, 400.0, 402.0))
    args = bench_algos.Args(num_steps=4, updates_per_call=2, repeats=3, set=("maze_size=5", "n_walls=3"))
    record = bench_algos.measure("plr", args, num_envs=4, num_seeds=2)
    assert record["compile_s"] == 7.0 and record["steady_s_per_update"] == 1.0
    assert record["s_per_update_range"] == [0.5, 2.0]
    assert record["points"] == TOY_POINTS and record["env_steps_per_s"] == 4 * 4 * TOY_POINTS * 2
    assert record["replay_fraction"] == round((1 + 4 + 9) / 3 / 100, 3)
    assert (record["num_devices"], record["sharded"]) == (num_devices, sharded)
    assert (record["algo"], record["num_envs"], record["num_steps"], record["num_seeds"]) == ("plr", 4, 4, 2)
    assert record["overrides"] == ["maze_size=5", "n_walls=3"] and record["config"]["maze_size"] == 5
    assert {"device", "jax", "jaxlib", "commit"} <= record.keys()
    (placed,) = placement.placed
    assert placement.given == [4]  # split by the envs of a seed
    assert bool(placed.buffer.filled.all()) and placed.buffer.scores.shape == (TOY_POINTS * 2, TOY_CAPACITY)


def test_bench_algos_reports_no_replay_fraction_for_a_method_without_replay(monkeypatch):
    """A script whose chunk reports no replay fraction (DR) gets None, not a number."""
    monkeypatch.setattr(bench_algos, "run_functions", lambda config, make_train, script: toy_functions(False))
    monkeypatch.setattr(bench_algos, "time", fake_clock(0.0, 1.0, 2.0, 3.0))
    record = bench_algos.measure("dr", bench_algos.Args(num_steps=4, updates_per_call=1, repeats=1), 2, 1)
    assert record["replay_fraction"] is None and record["steady_s_per_update"] == 1.0


def test_warm_buffers_fills_every_slot_with_levels_of_the_configs_maze_and_leaves_other_runners_alone():
    """Every slot of every entry filled with a level of the config's size and walls (drawn with replacement: at most
    --n-walls), a score in [0, 1) that is also its highest return, and an age below the capacity, not all the same;
    a runner without a level buffer comes back as it is."""
    config = with_flags(bench_algos.load_algo("plr").Config(), maze_size=5, n_walls=3)
    runner = toy_functions(True).init(jax.random.split(jax.random.key(0), 2))
    buffer = bench_algos.warm_buffers(runner, config).buffer
    assert bool(buffer.filled.all()) and buffer.levels.wall_map.shape == (TOY_POINTS * 2, TOY_CAPACITY, 5, 5)
    assert int(buffer.levels.wall_map.sum(axis=(2, 3)).max()) <= 3
    assert bool(((0 <= buffer.scores) & (buffer.scores < 1)).all()) and bool(
        (buffer.max_returns == buffer.scores).all()
    )
    assert bool(((0 <= buffer.ages) & (buffer.ages < TOY_CAPACITY)).all()) and len(np.unique(buffer.ages)) > 1
    plain = SimpleNamespace(train_state="untouched")
    assert bench_algos.warm_buffers(plain, config) is plain


def made_up_record(name: str, num_envs: int, num_seeds: int, overrides: tuple[str, ...] = ()) -> dict:
    return {
        "algo": name,
        "num_envs": num_envs,
        "num_steps": 4,
        "num_seeds": num_seeds,
        "num_devices": 1,
        "sharded": "-",
        "compile_s": 7.0,
        "steady_s_per_update": 0.5,
        "env_steps_per_s": 30000 * num_seeds,
        "overrides": list(overrides),
    }


def test_bench_algos_measures_every_combination_and_tables_each_beside_minimax_once_per_method_and_size(
    monkeypatch, capsys
):
    """With made-up measurements: one measurement per method x envs x seeds in that order, minimax once per method
    x envs, one JSON line each, a side-by-side row per measurement (ours per seed: 30,000 against minimax's 12,000 is
    2.50x; then each side's s/update and compile s in the header's order), and the summary row of each measurement.
    Mutation checked by hand: minimax's compile seconds in ours' column fails this test."""
    ours, theirs = [], []

    def measure(name, args, num_envs, num_seeds):
        ours.append((name, num_envs, num_seeds))
        return made_up_record(name, num_envs, num_seeds, args.set)

    def measure_minimax(name, args, num_envs):
        theirs.append((name, num_envs))
        return {"algo": f"minimax:{name}", "env_steps_per_s": 12000, "steady_s_per_update": 0.25, "compile_s": 9.0}

    monkeypatch.setattr(bench_algos, "measure", measure)
    monkeypatch.setattr(bench_algos, "measure_minimax", measure_minimax)
    bench_algos.main(bench_algos.Args(algos=("dr", "plr"), num_envs=(2, 4), num_seeds=(1, 3), minimax=True))
    assert ours == [(name, envs, seeds) for name in ("dr", "plr") for envs in (2, 4) for seeds in (1, 3)]
    assert theirs == [(name, envs) for name in ("dr", "plr") for envs in (2, 4)]
    stdout = capsys.readouterr().out
    assert [line["algo"] for line in json_lines(stdout)] == ["dr"] * 4 + ["plr"] * 4 + ["minimax:dr"] * 2 + [
        "minimax:plr"
    ] * 2
    header = "| algo | ours env steps/s | minimax env steps/s | speed-up | ours s/update | minimax s/update |"
    assert header + " ours compile s | minimax compile s |" in stdout
    assert "| plr (4 envs, 3 seeds) | 30,000 | 12,000 | 2.50x | 0.5 | 0.25 | 7.0 | 9.0 |" in stdout.splitlines()
    assert "| plr | - | 4 x 4 | 3 | 1 (-) | 7.0 | 0.5 | 90,000 |" in stdout.splitlines()
    bench_algos.main(bench_algos.Args(algos=("dr",), num_envs=(2,), set=("lstm_size=8", "lr=0.001")))
    stdout = capsys.readouterr().out
    assert "minimax" not in stdout and "| dr | lstm_size=8 lr=0.001 | 2 x 4 | 1 | 1 (-) |" in stdout
    assert theirs == [(name, envs) for name in ("dr", "plr") for envs in (2, 4)]


def test_minimax_workers_get_the_methods_config_and_the_sizes(tmp_path):
    """The minimax training worker gets minimax's name for the method (pplr for plr_parallel) and the envs, steps and
    repeats; the env worker every env count at once and the wrapper. Each reads the worker's JSON lines, not its
    text."""
    venv = echoing_venv(tmp_path)
    args = bench_algos.Args(num_steps=16, repeats=5, minimax_venv=str(venv))
    result = bench_algos.measure_minimax("plr_parallel", args, 4)
    worker = str(REPO_ROOT / "benchmarks" / "peers" / "minimax_worker.py")
    assert result["argv"] == [worker, "--config", "pplr", "--num-envs", "4", "--num-steps", "16", "--repeats", "5"]
    env_args = bench_env.Args(num_envs=(4, 8), num_steps=16, repeats=5, wrapper="restart", minimax_venv=str(venv))
    (line,) = bench_env.measure_minimax(env_args)
    worker = str(REPO_ROOT / "benchmarks" / "peers" / "minimax_env_worker.py")
    assert line["argv"] == [
        worker,
        "--num-envs",
        "4",
        "8",
        "--num-steps",
        "16",
        "--repeats",
        "5",
        "--wrapper",
        "restart",
    ]


def test_a_peers_virtual_environment_is_made_once_with_its_pinned_packages(tmp_path, monkeypatch):
    """A venv that is missing is created with the running Python and the packages installed with its own pip; one
    whose Python exists is used as it is."""
    commands = []
    monkeypatch.setattr(bench_algos.subprocess, "run", lambda command, check: commands.append(command))
    python = bench_algos.pinned_python(tmp_path / "venv", ("a==1", "b==2"))
    assert python == tmp_path / "venv" / "bin" / "python"
    assert commands == [
        [sys.executable, "-m", "venv", str(tmp_path / "venv")],
        [str(python), "-m", "pip", "install", "-q", "a==1", "b==2"],
    ]
    python.parent.mkdir(parents=True)
    python.touch()
    assert bench_algos.pinned_python(tmp_path / "venv", ("a==1",)) == python and len(commands) == 2


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


def test_bench_env_refuses_minimax_at_any_maze_but_the_shipped_one_before_measuring(monkeypatch):
    """Either the size or the walls away from 13x13 with 60 walls is refused, before anything is measured."""
    monkeypatch.setattr(bench_env, "measure", lambda args, num_envs: pytest.fail("measured before the refusal"))
    for size, n_walls in ((13, 59), (11, 60)):
        with pytest.raises(SystemExit, match="--size 13 --n-walls 60"):
            bench_env.main(bench_env.Args(size=size, n_walls=n_walls, minimax=True))


def test_bench_env_makes_one_level_per_four_steps_unless_told():
    """dr.py's fresh levels per env: --num-steps / 4 rounded up, or --levels-per-env as given."""
    assert [bench_env.levels_per_env(bench_env.Args(num_steps=steps)) for steps in (1, 4, 8, 9, 256)] == [
        1,
        1,
        2,
        3,
        64,
    ]
    assert bench_env.levels_per_env(bench_env.Args(num_steps=8, levels_per_env=5)) == 5


def test_bench_env_records_the_timers_figures_and_the_reused_levels_of_every_timed_call(monkeypatch):
    """With a stand-in timer (a 0.5 s median call; two timed calls whose episodes reused 3 and 4 levels): the record
    has 4 envs x 8 steps / 0.5 s, the reuses summed, the wrapper, the levels per env (None on restart), the size, the
    arguments with their tags, and the device; the timer is handed the rollout, typed keys and the repeats."""
    handed = []

    def timer(rollout, make_key, repeats):
        handed.append((make_key, repeats))
        return env_timing.Timing(compile_s=1.5, steady_s=0.5, outputs=[(0.0, jnp.int32(3)), (0.0, jnp.int32(4))])

    monkeypatch.setattr(bench_env, "time_rollout", timer)
    args = bench_env.Args(num_steps=8, repeats=2, size=5, n_walls=3, tags={"machine": "test"})
    record = bench_env.measure(args, num_envs=4)
    assert handed == [(jax.random.key, 2)]
    assert (record["bench"], record["impl"], record["wrapper"], record["size"]) == ("env", "cleanued", "resample", 5)
    assert (record["num_envs"], record["num_steps"], record["env_steps_per_s"], record["compile_s"]) == (4, 8, 64, 1.5)
    assert record["levels_per_env"] == 2 and record["reused_level_episodes"] == 7
    assert record["config"] == asdict(args) and record["config"]["tags"] == {"machine": "test"}
    assert {"device", "jax", "commit"} <= record.keys()
    restart = bench_env.measure(bench_env.Args(num_steps=8, wrapper="restart"), num_envs=4)
    assert restart["wrapper"] == "restart" and restart["levels_per_env"] is None


def test_bench_env_counts_the_episodes_that_ran_out_of_fresh_levels_and_reads_every_observation(monkeypatch):
    """Real rollouts of 8 steps on 2 envs, timed twice, with episodes of one step (max_steps 1): each call every env
    starts 1 + 8 episodes, so with 3 fresh levels made per env 6 reuse one (2 envs x 6 x 2 calls = 24), and with 10
    none do.
    Each call's total holds every observation: a cell of the normalised view reads at least 0.1 (MiniGrid's empty cell
    is object 1), so 25 cells per step exceed what rewards alone (at most 1 per step) could add. Mutation checked by
    hand: the reuses without the floor at 0, 64 levels made whatever --levels-per-env, or the total without the
    observations, fails this test."""

    def timer(rollout, make_key, repeats):
        timing = env_timing.time_rollout(rollout, make_key, repeats)
        totals.extend(float(total) for total, _ in timing.outputs)
        return timing

    def reset(rng, levels, params):
        made.append(levels.wall_map.shape)  # one env's levels, when the rollout is traced
        return reset_to_fresh_levels(rng, levels, params)

    totals, made = [], []
    monkeypatch.setattr(bench_env, "time_rollout", timer)
    monkeypatch.setattr(bench_env, "reset_to_fresh_levels", reset)
    monkeypatch.setattr(bench_env, "EnvParams", functools.partial(EnvParams, max_steps=1))
    args = bench_env.Args(num_steps=8, repeats=2, size=5, n_walls=3)
    assert bench_env.measure(replace(args, levels_per_env=3), num_envs=2)["reused_level_episodes"] == 2 * 6 * 2
    assert bench_env.measure(replace(args, levels_per_env=10), num_envs=2)["reused_level_episodes"] == 0
    assert made == [(3, 5, 5), (10, 5, 5)]
    assert len(totals) == 4 and all(total >= 2 * 8 * 25 * 0.1 for total in totals)


def test_bench_env_tables_each_env_count_and_the_speed_up_over_minimax(monkeypatch, capsys):
    """With made-up measurements: a row per env count with the maze, steps/s and compile seconds in the header's
    order, then beside minimax's (ours 60,000 over its 20,000 is 3.00x), each side's compile seconds after."""

    def measure(args, num_envs):
        return {"num_envs": num_envs, "size": args.size, "env_steps_per_s": 15000 * num_envs, "compile_s": 1.5}

    def measure_minimax(args):
        return [{"num_envs": envs, "env_steps_per_s": 20000, "compile_s": 2.5} for envs in args.num_envs]

    monkeypatch.setattr(bench_env, "measure", measure)
    monkeypatch.setattr(bench_env, "measure_minimax", measure_minimax)
    bench_env.main(bench_env.Args(num_envs=(4, 8), wrapper="restart", minimax=True))
    lines = capsys.readouterr().out.splitlines()
    assert "| wrapper | maze | envs | steps/s | compile s |" in lines
    assert "| restart | 13x13 | 4 | 60,000 | 1.5 |" in lines and "| restart | 13x13 | 8 | 120,000 | 1.5 |" in lines
    assert "| restart | 4 | 60,000 | 20,000 | 3.00x | 1.5 | 2.5 |" in lines
    assert "| restart | 8 | 120,000 | 20,000 | 6.00x | 1.5 | 2.5 |" in lines
    assert len(json_lines("\n".join(lines))) == 4


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


@pytest.mark.parametrize(
    ("module", "field", "message"),
    [
        (bench_algos, "repeats", "--repeats must be at least 1, got 0"),
        (bench_env, "repeats", "--repeats must be at least 1, got 0"),
        (bench_env, "num_steps", "--num-steps must be at least 1, got 0"),
        (bench_env, "size", r"--size must be in \[2, 101\], got 0"),
    ],
)
def test_sizes_that_leave_nothing_to_time_are_refused_in_one_line(module, field, message):
    """`--repeats 0` leaves no call to take the median of, `--num-steps 0` no step and `--size 0` no maze: each is
    refused with the flag's name before anything compiles (bench_algos' other sizes are its scripts' own flags,
    which refuse them). Mutation checked by hand: the Args without their range check fails this test."""
    with pytest.raises(ConfigError, match=message):
        module.Args(**{field: 0})
