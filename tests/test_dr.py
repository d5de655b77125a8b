"""algos/dr.py: smoke, seed independence, exact resume (also after kill -9), bad input, --help, the carried LSTM state
and what the update hands compute_gae (chunked == one-shot: tests/test_contract.py). Tiny configs; the jitted
functions are shared per module to keep CPU compiles few."""

import csv
import hashlib
import json
import operator
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import flax.linen as nn
import jax
import numpy as np
import pytest

from algos import dr
from common import checkpoint
from common.config import with_flags
from common.errors import ConfigError
from tests.states import run_script

REPO_ROOT = Path(__file__).resolve().parents[1]
TINY = dict(
    num_seeds=2,
    num_envs=4,
    num_steps=16,
    lstm_size=16,
    maze_size=7,
    n_walls=10,
    max_steps=12,
    total_updates=4,
    log_interval=2,
    eval_interval=2,
    eval_mazes=("SixteenRooms",),
    eval_episodes=2,
    checkpoint_interval=2,
    screenshot_interval=2,
)


def tiny_config(tmp_path, **overrides) -> dr.Config:
    return with_flags(dr.Config(), **{**TINY, "runs_dir": str(tmp_path), **overrides})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny config's jitted functions, compiled once for the module."""
    config = tiny_config(tmp_path_factory.mktemp("runs"))
    functions = dr.make_train(config)
    return config, functions, jax.jit(functions.init), jax.jit(functions.step)


def seed_keys(config):
    return jax.random.split(jax.random.key(config.run.seed), config.run.num_seeds)


def assert_trees_equal(a, b):
    jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(x), np.asarray(y)), a, b)


def run_main(config):
    return run_script(dr, config)


def final_params(run_dir: Path, config):
    functions = dr.make_train(config)
    template = jax.eval_shape(functions.init, seed_keys(config))
    state, update, _ = checkpoint.load(checkpoint.list_checkpoints(run_dir / "checkpoints")[-1], template)
    return state, update


def test_param_count_matches_reference():
    config = dr.Config()
    params = jax.eval_shape(dr.make_train(config).init, jax.random.split(jax.random.key(0), 1)).train_state.params
    count = sum(np.prod(leaf.shape[1:]) for leaf in jax.tree.leaves(params))
    assert abs(count - 433_000) < 1_000, count  # docs/methods.md: about 433k


@pytest.mark.slow
def test_conv3x3_is_flax_valid_conv():
    images = jax.random.uniform(jax.random.key(0), (2, 3, 7, 6, 4))  # leading [T, B] axes, a non-square map
    reference = nn.Conv(8, (3, 3), padding="VALID", kernel_init=nn.initializers.orthogonal(np.sqrt(2)))
    params = dr.Conv3x3(8).init(jax.random.key(1), images)
    same = jax.tree.map(np.array_equal, params, reference.init(jax.random.key(1), images))
    assert all(jax.tree.leaves(same)), "same parameter names, shapes and initial values as nn.Conv"
    params = jax.tree.map(lambda leaf: jax.random.normal(jax.random.key(2), leaf.shape), params)
    np.testing.assert_allclose(
        dr.Conv3x3(8).apply(params, images), reference.apply(params, images), rtol=1e-5, atol=1e-5
    )


@pytest.mark.slow
def test_smoke_updates_and_metrics(tiny):
    config, functions, init, step_chunk = tiny
    runner = init(seed_keys(config))
    before = runner.train_state.params
    runner, metrics = step_chunk(runner)
    assert int(runner.update[0]) == config.run.log_interval
    for key in ("ppo/loss", "ppo/entropy", "ppo/value_loss", "level/walls", "train/episodes"):
        assert metrics[key].shape == (config.run.num_seeds, config.run.log_interval)
        assert np.isfinite(metrics[key]).all(), key
    assert np.asarray(metrics["train/episodes"]).sum() > 0, "12-step episodes must end within 16-step rollouts"
    changed = jax.tree.map(lambda a, b: bool((a != b).any()), before, runner.train_state.params)
    assert all(jax.tree.leaves(changed)), "every parameter should move in a PPO update"
    evaluation = jax.jit(functions.evaluate)(runner)
    assert set(evaluation) == {"eval/solve_rate/SixteenRooms", "eval/return/SixteenRooms"}
    assert evaluation["eval/return/SixteenRooms"].shape == (config.run.num_seeds,)


def test_vmapped_seed_equals_single_seed_run(tiny):
    config, functions, init, step_chunk = tiny
    keys = seed_keys(config)
    both, both_metrics = step_chunk(init(keys))
    for i in range(config.run.num_seeds):
        alone, alone_metrics = jax.jit(functions.step)(init(keys[i : i + 1]))
        # XLA may order float sums differently for a batch of 2 and of 1: equal up to rounding.
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7),
            jax.tree.map(operator.itemgetter(i), both.train_state.params),
            jax.tree.map(operator.itemgetter(0), alone.train_state.params),
        )
        np.testing.assert_allclose(both_metrics["ppo/loss"][i], alone_metrics["ppo/loss"][0], rtol=1e-4, atol=1e-6)


def test_every_env_plays_fresh_levels_of_its_own(tmp_path, monkeypatch):
    """The levels the envs hold during each update's rollout (`FreshLevelsState.levels`, read out through the helper
    that counts reused levels) are all different: no env shares a level with another, within an update or across
    the two. Mutation checked by hand: handing every env env 0's row of fresh levels in `update`
    (`jax.tree.map(lambda x: jnp.broadcast_to(x[:1], x.shape), fresh_levels)`) fails this test."""
    counted = dr.reused_levels
    monkeypatch.setattr(
        dr, "reused_levels", lambda end_states, *rest: {**counted(end_states, *rest), "levels": end_states.levels}
    )
    config = tiny_config(
        tmp_path, num_seeds=1, num_steps=8, lstm_size=8, maze_size=5, n_walls=3, max_steps=4, total_updates=2
    )
    functions = dr.make_train(config)
    _, metrics = jax.jit(functions.step)(jax.jit(functions.init)(seed_keys(config)))
    levels = jax.tree.map(lambda x: np.asarray(x[0]), metrics["levels"])  # leaves [updates, envs, fresh levels, ...]
    shape = (config.run.log_interval, config.ppo.num_envs, config.fresh_levels)
    assert levels.wall_map.shape[:3] == shape and config.fresh_levels > 1
    flat = [leaf.reshape(*shape, -1) for leaf in jax.tree.leaves(levels)]
    keys = {np.concatenate([leaf[index] for leaf in flat]).tobytes() for index in np.ndindex(shape)}
    assert len(keys) == np.prod(shape), "a level is played by two envs or in two updates"


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    config = tiny_config(tmp_path_factory.mktemp("runs"), run_name="smoke")
    return config, run_main(config)


@pytest.mark.slow
def test_main_writes_run_folder(smoke_run):
    config, run_dir = smoke_run
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["script"] == "algos/dr.py" and saved["config"]["num_envs"] == 4
    rows = (run_dir / "logs.csv").read_text().splitlines()
    header = rows[0].split(",")
    assert header[:6] == ["seed", "update", "student_updates", "env_steps", "wall_time", "sps"]
    assert "eval/solve_rate/SixteenRooms" in header and "ppo/loss" in header and "health/finite" not in header
    assert len(rows) == 1 + config.run.num_seeds * (config.run.total_updates // config.run.log_interval)
    assert [p.name for p in checkpoint.list_checkpoints(run_dir / "checkpoints")] == [
        "update_00000002.msgpack",
        "update_00000004.msgpack",
    ]
    assert len(list((run_dir / "images").glob("levels_update_*.png"))) == 2
    state, update = final_params(run_dir, config)
    assert update == 4 and int(state.update[0]) == 4


@pytest.mark.slow
def test_evaluate_command(smoke_run):
    config, run_dir = smoke_run
    command = [
        sys.executable,
        "-m",
        "common.evaluate",
        "--run-dir",
        str(run_dir),
        "--mazes",
        "SixteenRooms",
        "Crossing",
    ]
    risk = ["--risk", "--risk-levels", "10", "--risk-episodes", "2", "--risk-maze-size", "7", "--risk-walls", "10"]
    result = subprocess.run(
        [*command, "--episodes", "3", "--gif", *risk, "--batch", "8"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    (risk_csv,) = (run_dir / "eval").glob("risk_00000004_*.csv")
    risk_rows = list(csv.DictReader(open(risk_csv)))
    alphas = [float(row["alpha"]) for row in risk_rows[:: config.run.num_seeds]]
    assert alphas == [0.01, 0.1, 1, 2, 5, 10, 20, 50, 100]
    assert all(0.0 <= float(row["win_rate"]) <= 1.0 and row["levels"] == "10" for row in risk_rows)
    assert "worst 10%: win rate" in result.stdout and "risk evaluation: 40/40 attempts" in result.stderr
    assert "SixteenRooms: solve rate" in result.stdout
    assert "no interval: fewer than 3 seeds" in result.stdout and "±" not in result.stdout
    (csv_path,) = (run_dir / "eval").glob("evaluate_00000004_*.csv")
    rows = csv_path.read_text().splitlines()
    assert rows[0] == "maze,seed,update,episodes,solve_rate,return" and len(rows) == 1 + 2 * config.run.num_seeds
    assert all(0.0 <= float(row.split(",")[4]) <= 1.0 for row in rows[1:])
    assert (run_dir / "eval" / "SixteenRooms_update_00000004.gif").stat().st_size > 0
    bad = subprocess.run([*command[:4], str(run_dir / "nope")], cwd=REPO_ROOT, capture_output=True, text=True)
    missing = f"error: cannot evaluate {run_dir / 'nope'}: it does not exist (there is no 'nope' in {run_dir})"
    assert bad.returncode == 2 and bad.stderr.strip() == missing


@pytest.mark.slow
def test_wandb_offline_one_run_per_seed(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    run_dir = run_main(tiny_config(tmp_path, run_name="tracked", track=True, total_updates=2, eval_interval=0))
    offline_runs = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 2, offline_runs


@pytest.mark.slow
def test_resume_equals_uninterrupted(tmp_path):
    uninterrupted = run_main(tiny_config(tmp_path, run_name="straight", total_updates=6))
    run_main(tiny_config(tmp_path, run_name="split", total_updates=2))
    resumed = run_main(tiny_config(tmp_path, run_name="split", total_updates=6, resume=True))
    config = tiny_config(tmp_path, total_updates=6)
    (state_a, update_a), (state_b, update_b) = final_params(uninterrupted, config), final_params(resumed, config)
    assert update_a == update_b == 6
    assert_trees_equal(jax.random.key_data(state_a.rng), jax.random.key_data(state_b.rng))
    assert_trees_equal(state_a.train_state.params, state_b.train_state.params)
    assert_trees_equal(state_a.train_state.opt_state, state_b.train_state.opt_state)
    logs = [np.genfromtxt(d / "logs.csv", delimiter=",", names=True) for d in (uninterrupted, resumed)]
    np.testing.assert_array_equal(logs[0]["ppoloss"], logs[1]["ppoloss"])


def file_hashes(directory: Path) -> dict:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_bad_checkpoints_and_configs_fail_cleanly(tmp_path):
    run_dir = run_main(tiny_config(tmp_path, run_name="victim", total_updates=2))
    newest = checkpoint.list_checkpoints(run_dir / "checkpoints")[-1]

    before = file_hashes(run_dir)
    with pytest.raises(ConfigError, match="config differs in --lr: saved 0.0001, now 0.001"):
        run_main(tiny_config(tmp_path, run_name="victim", total_updates=4, resume=True, lr=1e-3))
    with pytest.raises(ConfigError, match="already exists: pass --resume"):
        run_main(tiny_config(tmp_path, run_name="victim"))
    assert file_hashes(run_dir) == before

    newest.write_bytes(newest.read_bytes()[:-100])
    before = file_hashes(run_dir)
    with pytest.raises(checkpoint.CheckpointError, match="truncated or corrupted.*delete it to resume"):
        run_main(tiny_config(tmp_path, run_name="victim", total_updates=4, resume=True))
    assert file_hashes(run_dir) == before

    data = bytearray(newest.read_bytes())
    newest.write_bytes(checkpoint.MAGIC + b"0" * 64 + b"\n" + bytes(data[len(checkpoint.MAGIC) + 65 :]))
    with pytest.raises(checkpoint.CheckpointError, match="checksum mismatch"):
        run_main(tiny_config(tmp_path, run_name="victim", total_updates=4, resume=True))
    newest.write_bytes(b"not a checkpoint")
    with pytest.raises(checkpoint.CheckpointError, match="bad header"):
        run_main(tiny_config(tmp_path, run_name="victim", total_updates=4, resume=True))


def test_checkpoint_from_another_config_is_refused(tmp_path):
    run_dir = run_main(tiny_config(tmp_path, run_name="small", total_updates=2))
    bigger = tiny_config(tmp_path, lstm_size=32)
    template = jax.eval_shape(dr.make_train(bigger).init, seed_keys(bigger))
    with pytest.raises(checkpoint.CheckpointError, match="does not match this config's runner state"):
        checkpoint.load(checkpoint.list_checkpoints(run_dir / "checkpoints")[-1], template)


@pytest.mark.slow
def test_non_finite_training_stops_without_saving(tmp_path):
    config = tiny_config(tmp_path, run_name="diverge", eval_interval=0)
    # The flags refuse an infinite learning rate; set it behind their back to make training diverge.
    object.__setattr__(config.ppo, "lr", float("inf"))
    with pytest.raises(SystemExit, match="non-finite loss or parameters in updates 1-2 .*last good checkpoint: none"):
        run_main(config)
    assert checkpoint.list_checkpoints(Path(config.run.runs_dir) / "diverge" / "checkpoints") == []


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--num-envs", "5", "--num-minibatches", "2"], "--num-envs (5) must be divisible by --num-minibatches (2)"),
        (["--checkpoint-interval", "15"], "--checkpoint-interval (15) must be a multiple of --log-interval (10)"),
        (["--eval-mazes", "Nope"], "unknown --eval-mazes entry 'Nope'"),
        (["--resume", "--overwrite"], "--resume and --overwrite exclude each other"),
    ],
)
def test_invalid_flags_fail_before_compiling_with_one_line(flags, message, tmp_path):
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "algos/dr.py", *flags, "--runs-dir", str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), result.stderr
    assert not list(tmp_path.iterdir()), "nothing may be written"
    assert time.perf_counter() - started < 60


@pytest.mark.slow
def test_resume_after_kill_9_equals_uninterrupted(tmp_path):
    flags = [
        "--num-seeds", "2", "--num-envs", "4", "--num-steps", "16", "--lstm-size", "16", "--maze-size", "7",
        "--n-walls", "10", "--max-steps", "12", "--log-interval", "2", "--eval-interval", "0",
        "--checkpoint-interval", "2", "--screenshot-interval", "0", "--runs-dir", str(tmp_path),
    ]  # fmt: skip
    script = [sys.executable, "algos/dr.py", *flags]
    subprocess.run(
        [*script, "--run-name", "straight", "--total-updates", "40"], cwd=REPO_ROOT, check=True, capture_output=True
    )
    victim = subprocess.Popen(
        [*script, "--run-name", "killed", "--total-updates", "40"], cwd=REPO_ROOT, stderr=subprocess.DEVNULL
    )
    checkpoints_dir = tmp_path / "killed" / "checkpoints"
    deadline = time.time() + 120
    while time.time() < deadline and len(checkpoint.list_checkpoints(checkpoints_dir)) < 2:
        time.sleep(0.05)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    saved = checkpoint.list_checkpoints(checkpoints_dir)
    assert saved and int(saved[-1].stem.split("_")[1]) < 40, "the kill must land mid-run"
    subprocess.run(
        [*script, "--run-name", "killed", "--total-updates", "40", "--resume"],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
    )
    config = with_flags(dr.Config(), **{**TINY, "total_updates": 40, "eval_interval": 0, "screenshot_interval": 0})
    (state_a, _), (state_b, _) = final_params(tmp_path / "straight", config), final_params(tmp_path / "killed", config)
    assert_trees_equal(state_a.train_state.params, state_b.train_state.params)
    rows = (tmp_path / "killed" / "logs.csv").read_text().splitlines()[1:]
    updates = [int(row.split(",")[1]) for row in rows]
    assert updates == sorted(updates) and len(updates) == 2 * 20, "no duplicate or missing log rows after resume"


@pytest.mark.slow
def test_sigterm_saves_a_checkpoint_and_exits(tmp_path):
    script = [
        sys.executable, "algos/dr.py", "--num-envs", "4", "--num-steps", "8", "--lstm-size", "16",
        "--log-interval", "1", "--eval-interval", "0", "--checkpoint-interval", "1000", "--screenshot-interval", "0",
        "--runs-dir", str(tmp_path),
    ]  # fmt: skip
    process = subprocess.Popen([*script, "--run-name", "term"], cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True)
    logs = tmp_path / "term" / "logs.csv"
    deadline = time.time() + 120
    while time.time() < deadline and (not logs.exists() or len(logs.read_text().splitlines()) < 3):
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr  # 128 + SIGTERM: stopped, not finished; the checkpoint is saved
    assert "stopped by SIGTERM" in stderr
    assert checkpoint.list_checkpoints(tmp_path / "term" / "checkpoints"), "a checkpoint must be saved on SIGTERM"


@pytest.mark.slow
def test_resume_needs_only_the_run_name_and_refuses_every_changed_flag(tmp_path):
    small = "--num-envs 4 --num-steps 16 --lstm-size 16 --maze-size 7 --n-walls 10 --max-steps 12 --log-interval 2"
    flags = [*small.split(), "--eval-interval", "0", "--checkpoint-interval", "2", "--screenshot-interval", "0"]
    command = [sys.executable, "algos/dr.py", "--runs-dir", str(tmp_path), "--run-name", "r"]
    subprocess.run([*command, *flags, "--total-updates", "2"], cwd=REPO_ROOT, check=True, capture_output=True)
    resumed = subprocess.run(
        [*command, "--resume", "--total-updates", "4"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed" in resumed.stderr and "reached --total-updates 4" in resumed.stderr
    saved = json.loads((tmp_path / "r" / "config.json").read_text())["config"]
    assert saved["num_envs"] == 4 and saved["total_updates"] == 4 and saved["lstm_size"] == 16
    before = file_hashes(tmp_path / "r")
    refused = subprocess.run(
        [*command, "--resume", "--lr", "0.001", "--num-envs", "8", "--gamma", "0.9"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    for differing in ("--gamma: saved 0.995, now 0.9", "--lr: saved 0.0001, now 0.001", "--num-envs: saved 4, now 8"):
        assert differing in refused.stderr
    assert file_hashes(tmp_path / "r") == before


@pytest.mark.slow
def test_carry_across_updates_starts_each_update_from_the_last_carry(tiny):
    config, functions, init, step_chunk = tiny
    assert init(seed_keys(config)).carry is None, "off by default: every update starts from a zero carry"
    carried = with_flags(config, carry_across_updates=True)
    functions = dr.make_train(carried)
    runner = jax.jit(functions.init)(seed_keys(carried))
    assert all(float(np.abs(c).max()) == 0 for c in runner.carry)
    after, metrics = jax.jit(functions.step)(runner)
    assert all(float(np.abs(c).max()) > 0 for c in after.carry), "the last rollout's carry is kept"
    assert np.isfinite(metrics["ppo/loss"]).all()


@pytest.mark.slow
def test_carry_across_updates_plays_the_next_rollout_from_the_runner_s_carry(tiny):
    """With --carry-across-updates the rollout starts from the runner's carry, not from a reset: two runners that
    differ only in it train differently. (That the update replays the rollout from that same carry is
    tests/test_update_replays_the_rollout.py's.)"""
    config, *_ = tiny
    config = with_flags(config, carry_across_updates=True)
    functions = dr.make_train(config)
    runner = jax.jit(functions.init)(seed_keys(config))
    other = runner.replace(carry=jax.tree.map(lambda c: c + 0.5, runner.carry))
    step = jax.jit(functions.step)
    values = [np.asarray(step(start)[1]["ppo/mean_value"]) for start in (runner, other)]
    assert np.abs(values[0] - values[1]).max() > 1e-6


@pytest.mark.slow
def test_the_update_s_advantages_use_its_gamma_and_lambda_and_bootstrap_from_the_last_value(tmp_path, monkeypatch):
    """compute_gae, as the update calls it: --gamma then --gae-lambda (distinct here), and a predicted value, not 0,
    for the steps after the rollout."""
    calls, last_values = [], []

    def recording(transitions, last_value, gamma, gae_lambda):
        calls.append((gamma, gae_lambda))
        jax.debug.callback(lambda value: last_values.append(np.asarray(value)), last_value)
        return compute_gae(transitions, last_value, gamma, gae_lambda)

    compute_gae = dr.compute_gae
    monkeypatch.setattr(dr, "compute_gae", recording)
    config = tiny_config(tmp_path, gamma=0.9, gae_lambda=0.7)
    functions = dr.make_train(config)
    jax.block_until_ready(jax.jit(functions.step)(jax.jit(functions.init)(seed_keys(config))))
    assert set(calls) == {(0.9, 0.7)}
    assert last_values and all(np.abs(value).max() > 0 for value in last_values)


def test_levels_made_per_env_are_counted_when_an_env_runs_out(tmp_path):
    """Episodes of at most 2 steps over 16-step rollouts: 8 or more played per env, exactly 8 when none reaches the
    goal, and one more started by the last step, never played. With 8 fresh levels per env none is reused (the
    count said 1 per env when it counted that unplayed start: a false alarm); with 2, every played episode after the
    second reuses one."""
    reused = {}
    for levels_per_env in (8, 2):
        config = tiny_config(tmp_path, max_steps=2, levels_per_env=levels_per_env, log_interval=1, total_updates=1)
        functions = dr.make_train(config)
        _, metrics = jax.jit(functions.step)(jax.jit(functions.init)(seed_keys(config)))
        reused[levels_per_env] = np.asarray(metrics["train/reused_levels"])[:, 0]
    assert (reused[8] == 0.0).any(), "no seed reached the goal: no env needed a ninth level"
    assert (reused[2] >= TINY["num_envs"] * (16 // 2 - 2)).all()
    np.testing.assert_array_equal(reused[2] - reused[8], TINY["num_envs"] * 6)


def test_the_health_check_covers_the_optimizer_state(tiny):
    """An infinite Adam second moment leaves the parameters finite (the update divides by it) but poisons every
    later step: the chunk is reported unhealthy before a checkpoint keeps it."""
    config, _, init, step = tiny
    runner = init(seed_keys(config))
    _, healthy = step(runner)
    assert np.asarray(healthy["health/finite"]).all()
    adam = runner.train_state.opt_state[1][0]
    poisoned = runner.replace(
        train_state=runner.train_state.replace(
            opt_state=(
                runner.train_state.opt_state[0],
                (adam._replace(nu=jax.tree.map(lambda x: x + np.inf, adam.nu)), *runner.train_state.opt_state[1][1:]),
            )
        )
    )
    after, metrics = step(poisoned)
    assert all(np.isfinite(leaf).all() for leaf in jax.tree.leaves(after.train_state.params))
    assert not np.asarray(metrics["health/finite"]).any()
