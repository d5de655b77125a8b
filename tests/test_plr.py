"""algos/plr.py: the buffer warms up and replay happens, Robust PLR learns only from replay, PLR from
both, and resume (buffer included) is exact."""

import csv

import jax
import numpy as np
import pytest

from algos import plr
from common import level_buffer
from common.config import with_flags
from common.errors import ConfigError
from envs.levels import sample_dr_level
from tests.states import assert_states_close, newest_state, run_script

TINY = dict(
    num_seeds=2,
    num_envs=4,
    num_steps=24,
    max_steps=12,
    maze_size=5,
    n_walls=4,
    lstm_size=16,
    buffer_size=16,
    total_updates=8,
    log_interval=8,
    eval_interval=0,
    checkpoint_interval=8,
    screenshot_interval=0,
)


def tiny_config(tmp_path, **overrides) -> plr.Config:
    return with_flags(plr.Config(), **{**TINY, "runs_dir": str(tmp_path), **overrides})


def run_chunk(config):
    functions = plr.make_train(config)
    before = jax.jit(functions.init)(jax.random.split(jax.random.key(0), config.run.num_seeds))
    after, metrics = jax.jit(functions.step)(before)
    return functions, before, after, jax.device_get(metrics)


def params_changed(before, after) -> bool:
    return any(jax.tree.leaves(jax.tree.map(lambda x, y: bool((x != y).any()), before, after)))


@pytest.mark.slow
def test_buffer_warms_up_and_replay_happens(tmp_path):
    config = tiny_config(tmp_path)
    functions, _, runner, metrics = run_chunk(config)
    fill = metrics["buffer/fill"]
    assert (fill[:, 0] == 0.25).all(), "4 new levels of a 16-slot buffer after the first update"
    assert (np.diff(fill, axis=1) >= 0).all() and (fill[:, -1] >= config.min_fill_ratio).all()
    replayed = metrics["buffer/replay_fraction"]
    assert (replayed[:, :2] == 0).all(), "no replay before the buffer is half full (8 of 16 slots)"
    assert replayed.sum() > 0, "replay must happen once warm"
    assert np.isnan(metrics["level_replay/walls"][replayed == 0]).all()
    assert np.isfinite(metrics["level_replay/walls"][replayed == 1]).all()
    assert np.isfinite(metrics["buffer/mean_score"]).all()
    assert np.isfinite(metrics["ppo/loss"][replayed == 1]).all(), "Robust PLR steps on replay updates"
    assert np.isnan(metrics["ppo/loss"][replayed == 0]).all(), "and reports no step on the others"
    top, labels = jax.jit(functions.levels)(runner)
    assert top.wall_map.shape == (config.run.num_seeds, config.ppo.num_envs, 5, 5)
    scores = np.where(runner.buffer.filled, runner.buffer.scores, -np.inf)
    np.testing.assert_allclose(labels["score"], -np.sort(-scores, axis=1)[:, : config.ppo.num_envs])


@pytest.mark.slow
@pytest.mark.parametrize(("exploratory", "learns"), [(False, False), (True, True)])
def test_robust_plr_learns_only_from_replay(tmp_path, exploratory, learns):
    config = tiny_config(tmp_path, replay_prob=0.0, exploratory_grad_updates=exploratory, num_seeds=1)
    _, before, after, metrics = run_chunk(config)
    assert (metrics["buffer/replay_fraction"] == 0).all()
    assert params_changed(before.train_state.params, after.train_state.params) == learns
    assert int(after.buffer.filled.sum()) > 4, "new levels still fill the buffer"


@pytest.mark.slow
def test_one_seed_runs_unbatched_like_the_vmapped_step(tmp_path):
    config = tiny_config(tmp_path, num_seeds=1)
    functions = plr.make_train(config)
    runner = jax.jit(functions.init)(jax.random.split(jax.random.key(0), 1))
    unbatched, unbatched_metrics = jax.jit(functions.step)(runner)
    # The same seed twice takes the vmapped path (lax.cond computes both branches and selects).
    twice = jax.tree.map(lambda leaf: jax.numpy.concatenate([leaf, leaf]), runner)
    batched, batched_metrics = jax.tree.map(lambda leaf: leaf[:1], jax.jit(functions.step)(twice))
    assert 0 < batched_metrics["buffer/replay_fraction"].sum() < config.run.total_updates, "both branches taken"
    assert_states_close(unbatched, batched, rtol=1e-4, atol=1e-6)
    for key, values in batched_metrics.items():
        np.testing.assert_allclose(unbatched_metrics[key], values, rtol=1e-4, atol=1e-6, err_msg=key)


@pytest.mark.slow
def test_resume_with_the_buffer_equals_uninterrupted(tmp_path):
    common = dict(log_interval=4, checkpoint_interval=4)
    straight = tiny_config(tmp_path, run_name="straight", **common)
    run_script(plr, straight)
    run_script(plr, tiny_config(tmp_path, run_name="split", total_updates=4, **common))
    run_script(plr, tiny_config(tmp_path, run_name="split", resume=True, **common))
    state_a, state_b = (newest_state(plr, straight, tmp_path / name) for name in ("straight", "split"))
    assert int(state_a.buffer.filled.sum()) > 0
    assert_states_close(state_a, state_b)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(buffer_size=2), "--buffer-size \\(2\\) must hold at least --num-envs \\(4\\) levels"),
        (dict(replay_prob=1.5), "--replay-prob must be in \\[0, 1\\]"),
        (dict(min_fill_ratio=0.0), "--min-fill-ratio must be in \\(0, 1\\]"),
        (dict(temperature=0.0), "--temperature must be positive"),
        (dict(log_interval=3), "--checkpoint-interval \\(8\\) must be a multiple of --log-interval \\(3\\)"),
        (dict(learnability_decay=0.5), "--learnability-decay \\(0.5\\) .*--score-function max_mc does not use it"),
    ],
)
def test_invalid_flags(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(tmp_path, **overrides)
    if "learnability_decay" in overrides:  # the score that uses it takes it
        tiny_config(tmp_path, **overrides, score_function="learnability")


@pytest.mark.slow
def test_the_budget_counts_student_updates(tmp_path, capsys):
    config = tiny_config(tmp_path, run_name="budget", total_updates=40, total_student_updates=3, log_interval=2)
    run_dir = run_script(plr, config)
    assert "reached --total-student-updates 3" in capsys.readouterr().err
    rows = list(csv.DictReader(open(run_dir / "logs.csv")))
    last = [row for row in rows if row["update"] == rows[-1]["update"]]
    assert int(last[0]["update"]) < 40 and min(int(row["student_updates"]) for row in last) >= 3
    state = newest_state(plr, config, run_dir)
    np.testing.assert_array_equal(state.student_updates, [int(row["student_updates"]) for row in last])
    assert (state.student_updates < state.update).all(), "Robust PLR steps only on replay updates"


def test_chunk_end_metrics_describe_the_replay_distribution_as_plain_numpy_does():
    """The buffer statistics logged at a chunk's end, against numpy on a hand-filled buffer (slots 0-4 filled)."""
    buffer = level_buffer.empty_buffer(sample_dr_level(jax.random.key(0), 5, 5, 3), 8)
    scores = np.array([0.5, -0.2, 0.9, 0.1, 0.3, 0, 0, 0], np.float32)
    ages = np.array([3, 0, 7, 1, 2, 0, 0, 0], np.int32)
    filled = np.arange(8) < 5
    buffer = buffer.replace(scores=scores, ages=ages, filled=filled)
    settings = dict(temperature=0.3, staleness_coef=0.3, prioritization="rank", ties="shared")
    metrics = jax.tree.map(np.asarray, plr.chunk_end_metrics(buffer, settings, num_updates=3))
    probs = np.asarray(level_buffer.replay_probabilities(buffer, **settings))
    assert all(np.isnan(values[:2]).all() for values in metrics.values()), "only the chunk's last update has a value"
    expected = {
        "buffer/weighted_staleness": (probs * ages).sum(),
        "buffer/weighted_score": (probs * np.where(filled, scores, 0)).sum(),
        "buffer/top_replay_probability": probs.max(),
        "buffer/replay_entropy": -(probs[probs > 0] * np.log(probs[probs > 0])).sum(),
        "buffer/score_q10": np.quantile(scores[:5], 0.1),
        "buffer/score_q50": 0.3,
        "buffer/score_q90": np.quantile(scores[:5], 0.9),
    }
    assert set(metrics) == set(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(metrics[key][-1], value, rtol=1e-5, err_msg=key)
