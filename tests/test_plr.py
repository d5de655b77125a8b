"""algos/plr.py: the buffer warms up and replay happens, Robust PLR learns only from replay, PLR from
both, each update keeps the buffer as minimax's PLRManager does (ages, outcome counts, max returns, metrics), and
resume (buffer included) is exact."""

import csv
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos import plr
from common import level_buffer
from common.config import with_flags
from common.errors import ConfigError
from envs.levels import sample_dr_level
from tests.states import assert_states_close, for_seed, newest_state, params_changed, run_script, run_update_by_update

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


class Updates(NamedTuple):
    """A tiny run driven one update per chunk, so the buffer can be compared before and after every update."""

    config: plr.Config
    functions: object  # plr.make_train(config)
    runners: list  # the runner state before each update, then after the last (host copies)
    metrics: dict  # every metric, [seeds, updates]


@pytest.fixture(scope="module")
def tiny_updates(tmp_path_factory) -> Updates:
    """TINY's 8 updates of 2 seeds: the same run as one chunk of 8 updates, one compile of a one-update chunk."""
    config = tiny_config(tmp_path_factory.mktemp("plr"), log_interval=1)
    functions = plr.make_train(config)
    runners, metrics = run_update_by_update(functions, config, jax.random.key(0))
    return Updates(config, functions, runners, metrics)


def same_levels(before: level_buffer.LevelBuffer, after: level_buffer.LevelBuffer) -> np.ndarray:
    """bool[capacity]: the slot was filled before and still holds that level (walls, goal and agent position)."""
    levels = (before.levels, after.levels)
    walls = np.equal(*(level.wall_map for level in levels)).all((1, 2))
    positions = np.equal(*(level.goal_pos for level in levels)).all(1) & np.equal(
        *(level.agent_pos for level in levels)
    ).all(1)
    return before.filled & after.filled & walls & positions


class Cycle(NamedTuple):
    """One update of one seed: whether it replayed, and that seed's buffer before and after it."""

    seed: int
    update: int
    replayed: bool
    before: level_buffer.LevelBuffer
    after: level_buffer.LevelBuffer

    @property
    def where(self) -> str:
        return f"seed {self.seed} update {self.update}"


def cycles(updates: Updates):
    """Every update of every seed, as a `Cycle`."""
    replayed = updates.metrics["buffer/replay_fraction"] == 1
    for seed in range(updates.config.run.num_seeds):
        for update in range(updates.config.run.total_updates):
            before, after = (for_seed(updates.runners[update + i].buffer, seed) for i in (0, 1))
            yield Cycle(seed, update, bool(replayed[seed, update]), before, after)


@pytest.mark.slow
def test_buffer_warms_up_and_replay_happens(tiny_updates):
    config, functions, runners, metrics = tiny_updates
    runner = runners[-1]
    fill = metrics["buffer/fill"]
    assert (fill[:, 0] == 0.25).all(), "4 new levels of a 16-slot buffer after the first update"
    assert (np.diff(fill, axis=1) >= 0).all() and (fill[:, -1] >= config.min_fill_ratio).all()
    replayed = metrics["buffer/replay_fraction"]
    assert (replayed[:, :2] == 0).all(), "no replay before the buffer is half full (8 of 16 slots)"
    assert replayed.sum() > 0, "replay must happen once warm"
    assert np.isnan(metrics["level_replay/walls"][replayed == 0]).all()
    assert np.isfinite(metrics["level_replay/walls"][replayed == 1]).all()
    assert np.isnan(metrics["level_new/walls"][replayed == 1]).all(), "replayed levels are not new levels"
    assert np.isfinite(metrics["level_new/walls"][replayed == 0]).all()
    assert np.isfinite(metrics["buffer/mean_score"]).all()
    assert np.isfinite(metrics["ppo/loss"][replayed == 1]).all(), "Robust PLR steps on replay updates"
    assert np.isnan(metrics["ppo/loss"][replayed == 0]).all(), "and reports no step on the others"
    top, labels = jax.jit(functions.levels)(runner)
    assert top.wall_map.shape == (config.run.num_seeds, config.ppo.num_envs, 5, 5)
    scores = np.where(runner.buffer.filled, runner.buffer.scores, -np.inf)
    np.testing.assert_allclose(labels["score"], -np.sort(-scores, axis=1)[:, : config.ppo.num_envs])


@pytest.mark.slow
def test_replay_starts_when_the_buffer_reaches_min_fill_ratio(tiny_updates):
    """Each update replays only if its buffer was at least --min-fill-ratio full, a buffer exactly that full may
    replay, and Robust PLR counts a student update for each replay update and only for those."""
    config, _, runners, metrics = tiny_updates
    at_threshold = []
    for cycle in cycles(tiny_updates):
        fill = cycle.before.filled.mean()
        assert fill >= config.min_fill_ratio or not cycle.replayed, f"{cycle.where} replayed at fill {fill}"
        if fill == config.min_fill_ratio:
            at_threshold.append(cycle.replayed)
    assert any(at_threshold), "some seed replays from a buffer exactly --min-fill-ratio full (8 of 16 slots)"
    student_updates = np.stack([runner.student_updates for runner in runners], axis=1)  # [seeds, updates + 1]
    np.testing.assert_array_equal(np.diff(student_updates, axis=1), metrics["buffer/replay_fraction"])


@pytest.mark.slow
def test_slot_ages_count_the_levels_played_since_the_slot_was_replayed(tiny_updates):
    """minimax's staleness: a new-level update ages every filled slot by the num_envs levels it plays (slots it
    fills start at 0); a replay update's num_envs draws each age every filled slot by 1 and restart the drawn one at
    0, so a slot is either not drawn (aged by num_envs) or younger than num_envs, and 1 to num_envs slots are drawn."""
    num_envs = tiny_updates.config.ppo.num_envs
    for cycle in cycles(tiny_updates):
        before, after, where = cycle.before, cycle.after, cycle.where
        aged = before.ages + num_envs
        if not cycle.replayed:
            np.testing.assert_array_equal(after.ages[before.filled], aged[before.filled], err_msg=where)
            assert (after.ages[after.filled & ~before.filled] == 0).all(), where
            continue
        drawn = before.filled & (after.ages != aged)
        assert (after.ages[drawn] < num_envs).all(), where
        assert 1 <= drawn.sum() <= num_envs, where
        np.testing.assert_array_equal(after.filled, before.filled, err_msg=f"{where}: a replay writes no new slot")


@pytest.mark.slow
def test_slots_keep_their_levels_outcomes_and_best_return(tiny_updates):
    """A slot holding the same level keeps adding its plays (learnability_decay 1): its success and failure counts
    and its running max return never fall. A filled slot's max return is 0 or a goal reward 1 - 0.9 t / max_steps,
    and it is positive exactly when the level was solved since it entered (a positive return is a success)."""
    config = tiny_updates.config
    grew = 0
    for cycle in cycles(tiny_updates):
        before, after, where = cycle.before, cycle.after, cycle.where
        kept = same_levels(before, after)
        for name in ("successes", "failures", "max_returns"):
            assert (getattr(after, name)[kept] >= getattr(before, name)[kept]).all(), f"{where}: {name} fell"
        grew += int((after.successes + after.failures > before.successes + before.failures)[kept].sum())
        max_returns = after.max_returns[after.filled]
        steps_to_goal = (1.0 - max_returns) * config.env.max_steps / 0.9
        goal_reward = (max_returns > 0) & (np.abs(steps_to_goal - np.round(steps_to_goal)) < 1e-3)
        assert ((max_returns == 0) | goal_reward).all(), f"{where}: max returns {max_returns}"
        np.testing.assert_array_equal(max_returns > 0, after.successes[after.filled] > 0, err_msg=where)
    assert grew > 0, "replayed levels add plays to their slots"


@pytest.mark.slow
def test_buffer_metrics_describe_the_buffer_each_update_leaves(tiny_updates):
    """buffer/fill, mean_score and max_score against numpy on the filled slots after each update; the first update
    fills 4 slots of the empty buffer with the 4 levels it played, so its buffer/level_score is their mean score."""
    metrics = tiny_updates.metrics
    for cycle in cycles(tiny_updates):
        before, after = cycle.before, cycle.after
        scores = after.scores[after.filled]
        expected = {
            "buffer/fill": after.filled.mean(),
            "buffer/mean_score": scores.mean(),
            "buffer/max_score": scores.max(),
        }
        for key, value in expected.items():
            np.testing.assert_allclose(
                metrics[key][cycle.seed, cycle.update], value, rtol=1e-6, atol=1e-6, err_msg=f"{key} {cycle.where}"
            )
        if cycle.update == 0:
            assert not before.filled.any() and after.filled.sum() == 4
            level_score = metrics["buffer/level_score"][cycle.seed, 0]
            np.testing.assert_allclose(level_score, scores.mean(), rtol=1e-6, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(("exploratory", "learns"), [(False, False), (True, True)])
def test_robust_plr_learns_only_from_replay(tmp_path, exploratory, learns):
    """With no replay, Robust PLR never steps and PLR steps every update, each step counted as a student update.
    Episodes here are longer than the rollout (30 > 24 steps) and end only at the goal (3x3 mazes without walls, so
    the untrained student reaches it often): only levels that finished an episode enter the buffer, so every level
    in it was solved and never timed out, and on some update fewer than num_envs levels entered a buffer with room."""
    config = tiny_config(
        tmp_path,
        replay_prob=0.0,
        exploratory_grad_updates=exploratory,
        num_seeds=1,
        max_steps=30,
        maze_size=3,
        n_walls=0,
    )
    _, before, after, metrics = run_chunk(config)
    assert (metrics["buffer/replay_fraction"] == 0).all()
    assert params_changed(before.train_state.params, after.train_state.params, seed=0) == learns
    assert int(after.student_updates[0]) == (config.run.total_updates if learns else 0)
    buffer = jax.tree.map(lambda x: np.asarray(x[0]), after.buffer)
    assert buffer.filled.sum() > 4, "new levels still fill the buffer"
    fill = metrics["buffer/fill"][0]
    entered = np.diff(fill, prepend=0.0) * config.buffer_size
    assert (entered[fill < 1] < config.ppo.num_envs).any(), "some level finished no episode"
    assert (buffer.successes[buffer.filled] >= 1).all() and (buffer.failures[buffer.filled] == 0).all()


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


class Rollout(NamedTuple):
    """The transition fields `level_scores` reads."""

    reward: jax.Array  # [T, B]
    done: jax.Array
    value: jax.Array


@pytest.mark.parametrize("score_function", ["max_mc", "pvl", "l1_value_loss", "learnability", "true_regret"])
def test_every_score_function_keeps_the_max_return_maxmc_would(score_function):
    """What a slot keeps as its max return does not depend on the score function: the larger of the stored one and
    this rollout's best with running_max, else this rollout's best; unchanged where no episode finished. Three envs
    over 4 steps: best 0.5 below a stored 0.8, best 0.9 above a stored 0.3, and no finished episode (stored 0.6)."""
    done = jnp.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 0]], bool)
    reward = jnp.where(done, jnp.array([0.5, 0.9, 0.0]), 0.0)
    rollout = Rollout(reward, done, jnp.zeros((4, 3)))
    before = level_buffer.LevelHistory(jnp.array([0.8, 0.3, 0.6]), jnp.zeros(3), jnp.zeros(3))
    levels = jax.vmap(functools.partial(sample_dr_level, height=3, width=3, n_walls=0))(
        jax.random.split(jax.random.key(0), 3)
    )
    for running_max, expected in ((True, [0.8, 0.9, 0.6]), (False, [0.5, 0.9, 0.6])):
        _, history = plr.level_scores(
            rollout,
            jnp.zeros((4, 3)),
            levels,
            before,
            score_function,
            running_max,
            learnability_decay=1.0,
            max_steps=8,
        )
        np.testing.assert_allclose(history.max_return, expected, err_msg=f"running_max={running_max}")


def test_a_buffer_of_one_batch_of_levels_is_valid(tmp_path):
    """--buffer-size may equal --num-envs: the check refuses only a buffer smaller than one batch of levels."""
    assert tiny_config(tmp_path, buffer_size=TINY["num_envs"]).buffer_size == TINY["num_envs"]


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
