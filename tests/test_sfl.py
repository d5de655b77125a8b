"""algos/sfl.py: learnability of known outcome sequences against plain Python (the first episodes only,
time-outs failing, levels with few episodes), scoring a scripted policy on real levels (told where each episode
starts), the buffer is exactly the top K, the batch's buffer/fresh split and picks from every slot, a real refresh's
buffer (p(1-p), highest first, the episodes it counts), scoring memory independent of its length, exact resume
across a refresh, and invalid flag combinations."""

import csv
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos import sfl
from common.config import with_flags
from common.errors import ConfigError
from envs.levels import level_from_text, sample_dr_level
from envs.maze import ACTION_FORWARD, ACTION_LEFT, NUM_ACTIONS, EnvParams
from tests.states import assert_states_close, newest_state, run_script

REPO_ROOT = Path(__file__).resolve().parents[1]
TINY = dict(
    num_seeds=2, num_envs=8, num_steps=16, lstm_size=8, maze_size=5, n_walls=3, max_steps=8, num_minibatches=2,
    refresh_interval=4, score_batches=2, score_batch_size=16, score_steps=24, buffer_size=6, total_updates=8,
    log_interval=2, eval_interval=0, checkpoint_interval=2, screenshot_interval=0,
)  # fmt: skip


def reference_outcomes(dones, rewards, counted):
    """Plain Python: completed episodes, and successes among the first `counted` of them."""
    completed = successes = 0
    for done, reward in zip(dones, rewards, strict=True):
        if done:
            successes += completed < counted and reward > 0
            completed += 1
    return completed, successes


def test_tally_and_learnability_match_plain_python():
    rng = np.random.default_rng(0)
    steps, levels, counted = 60, 40, 10
    dones = rng.uniform(size=(steps, levels)) < rng.uniform(0.0, 0.6, size=levels)
    dones[:, 0] = False  # a level that completes no episode
    rewards = np.where(dones & (rng.uniform(size=(steps, levels)) < 0.5), 0.7, 0.0)  # done without reward: time-out
    completed, successes = jnp.zeros(levels, jnp.int32), jnp.zeros(levels, jnp.int32)
    for t in range(steps):
        completed, successes = sfl.tally(completed, successes, jnp.asarray(dones[t]), jnp.asarray(rewards[t]), counted)
    scores, p = sfl.learnability(completed, successes, counted)
    for level in range(levels):
        total, wins = reference_outcomes(dones[:, level], rewards[:, level], counted)
        assert int(completed[level]) == total and int(successes[level]) == wins
        expected_p = wins / min(total, counted) if total else 0.0
        assert float(p[level]) == pytest.approx(expected_p) and float(scores[level]) == pytest.approx(
            expected_p * (1 - expected_p)
        )
    assert (np.asarray(completed) > counted).any() and (np.asarray(completed) == 0).any(), "both edge cases occur"


class Forward:
    """A stand-in policy that always moves forward."""

    def apply(self, params, carry, obs, reset):
        return carry, jnp.zeros((*reset.shape, 7)).at[..., 2].set(50.0), jnp.zeros(reset.shape)


def test_scoring_a_scripted_policy_on_real_levels():
    easy = level_from_text(">G..\n....\n....\n....")  # the goal one step ahead: every episode succeeds
    walled = level_from_text(">#..\n#...\n...G\n....")  # boxed in: every episode times out
    levels = jax.tree.map(lambda *x: jnp.stack(x), easy, walled)
    scores, p = sfl.score_levels(
        jax.random.key(0), Forward(), None, levels, EnvParams(max_steps=5), num_steps=30, counted=10, lstm=4, unroll=1
    )
    np.testing.assert_allclose(p, [1.0, 0.0])
    np.testing.assert_allclose(scores, [0.0, 0.0])


class ForwardOnlyAfterAReset:
    """A stand-in policy that moves forward on an episode's first step and turns left on every other."""

    def apply(self, params, carry, obs, reset):
        forward = jax.nn.one_hot(jnp.full(reset.shape, ACTION_FORWARD), NUM_ACTIONS) * 50.0
        left = jax.nn.one_hot(jnp.full(reset.shape, ACTION_LEFT), NUM_ACTIONS) * 50.0
        return carry, jnp.where(reset[..., None], forward, left), reset * 0.0


def test_scoring_tells_the_policy_where_each_episode_starts():
    """Told each episode's start and nothing else, the policy reaches a goal one step ahead in every episode (p 1)
    and one two steps ahead in none (it moves once, then turns: p 0). Told only the first start, it would reach the
    near goal once; told every step is a start, it would walk to the far one."""
    near, far = level_from_text(">G..\n....\n....\n...."), level_from_text(">.G.\n....\n....\n....")
    levels = jax.tree.map(lambda *x: jnp.stack(x), near, far)
    _, p = sfl.score_levels(
        jax.random.key(0), ForwardOnlyAfterAReset(), None, levels, EnvParams(max_steps=4), 40, 5, lstm=4, unroll=1
    )
    np.testing.assert_array_equal(p, [1.0, 0.0])


def test_buffer_picks_reach_every_slot():
    buffer = jax.vmap(sample_dr_level, (0, None, None, None))(jax.random.split(jax.random.key(5), 2), 5, 5, 0)
    buffer = buffer.replace(wall_map=buffer.wall_map.at[1, 0, 0].set(True))  # slot 1 is told by its one wall
    sample = lambda key: sample_dr_level(key, 5, 5, 20)  # noqa: E731
    picked = sfl.mixed_levels(jax.random.key(6), sample, buffer, 0, 64)
    assert set(np.asarray(picked.wall_map.sum(axis=(1, 2))).tolist()) == {0, 1}


def test_the_update_plays_fresh_levels_on_its_first_envs_and_buffer_levels_on_the_rest(tmp_path, monkeypatch):
    """--buffer-fraction 0.25 of 8 envs: the update asks for 6 fresh levels and 2 from the buffer, in that order
    (the metrics' train_fresh/ and train_buffer/ blocks read them so). Traced only, nothing compiled."""
    asked = []
    mixed_levels = sfl.mixed_levels

    def recording(rng, sample_level, buffer, num_fresh, num_buffer):
        asked.append((num_fresh, num_buffer))
        return mixed_levels(rng, sample_level, buffer, num_fresh, num_buffer)

    monkeypatch.setattr(sfl, "mixed_levels", recording)
    config = with_flags(sfl.Config(), **TINY, runs_dir=str(tmp_path), buffer_fraction=0.25)
    functions = sfl.make_train(config)
    jax.eval_shape(functions.step, jax.eval_shape(functions.init, jax.random.split(jax.random.key(0), 2)))
    assert set(asked) == {(6, 2)}


@pytest.mark.slow
@pytest.mark.parametrize("counted_episodes", [10, 1])
def test_a_refresh_keeps_the_most_learnable_scored_levels_with_their_p(counted_episodes, tmp_path):
    """After a chunk that starts with a refresh, each seed's buffer holds learnability p(1-p) of its p, highest
    first, and the levels shown for the run are the buffer's in that order. Counting one episode a level, every p is
    0 or 1, so no level is learnable; the random policy still solves some."""
    config = with_flags(sfl.Config(), **TINY, runs_dir=str(tmp_path), counted_episodes=counted_episodes)
    functions = sfl.make_train(config)
    runner = jax.jit(functions.init)(jax.random.split(jax.random.key(0), config.run.num_seeds))
    runner, metrics = jax.jit(functions.step)(runner)
    learnability, p = np.asarray(runner.learnability), np.asarray(runner.success)
    np.testing.assert_allclose(learnability, p * (1 - p), rtol=1e-6)
    assert (np.diff(learnability, axis=1) <= 0).all(), "highest first"
    _, labels = jax.jit(functions.levels)(runner)
    np.testing.assert_array_equal(np.asarray(labels["p"]), p)
    if counted_episodes == 1:
        assert set(np.unique(p).tolist()) <= {0.0, 1.0} and float(np.asarray(metrics["sfl/scored_success"]).max()) > 0
        assert float(np.abs(np.asarray(metrics["sfl/learnable_fraction"])).max()) == 0
    else:
        assert (learnability[:, 0] > 0).all(), "the random policy finds learnable levels"
        assert (np.asarray(metrics["sfl/learnable_fraction"]) > 0).all()


def test_the_buffer_is_exactly_the_top_k_and_the_batch_splits_by_the_fraction():
    scores = jnp.array([0.1, 0.25, 0.0, 0.24, 0.09, 0.21])
    levels = jax.vmap(sample_dr_level, (0, None, None, None))(jax.random.split(jax.random.key(1), 6), 5, 5, 3)
    buffer, kept, p = sfl.most_learnable(scores, scores * 2, levels, 3)
    np.testing.assert_array_equal(kept, scores[jnp.array([1, 3, 5])])
    np.testing.assert_array_equal(buffer.wall_map, levels.wall_map[jnp.array([1, 3, 5])])
    empty_buffer = jax.vmap(sample_dr_level, (0, None, None, None))(jax.random.split(jax.random.key(2), 3), 5, 5, 0)
    sample = lambda key: sample_dr_level(key, 5, 5, 20)  # noqa: E731
    config = with_flags(sfl.Config(), num_envs=8, buffer_fraction=0.25, buffer_size=3, score_batch_size=3)
    mixed = sfl.mixed_levels(jax.random.key(3), sample, empty_buffer, 8 - config.buffer_envs, config.buffer_envs)
    walls = np.asarray(mixed.wall_map.sum(axis=(1, 2)))
    assert config.buffer_envs == 2 and (walls[-2:] == 0).all() and (walls[:-2] > 0).all()


def test_scoring_memory_does_not_grow_with_its_length():
    levels = jax.vmap(sample_dr_level, (0, None, None, None))(jax.random.split(jax.random.key(4), 4), 5, 5, 3)
    network, params_shape = Forward(), None

    def scan_of(num_steps: int):
        def score():
            return sfl.score_levels(jax.random.key(6), network, params_shape, levels, EnvParams(), num_steps, 10, 8, 1)

        scans = [eqn for eqn in jax.make_jaxpr(score)().eqns if eqn.primitive.name == "scan"]
        (scan,) = [eqn for eqn in scans if eqn.params["length"] == num_steps]
        return scan

    short, long = scan_of(10), scan_of(1000)
    assert len(long.outvars) == long.params["num_carry"], "nothing is stacked over steps: every output is carry"
    assert [v.aval for v in short.outvars] == [v.aval for v in long.outvars], "the carry does not depend on length"


@pytest.mark.slow
def test_resume_across_a_refresh_is_exact(tmp_path):
    straight = with_flags(sfl.Config(), **TINY, runs_dir=str(tmp_path), run_name="straight")
    run_script(sfl, straight)
    # Annealing ties the schedule to --total-updates, so the first half stops on env steps instead (2 updates).
    run_script(sfl, with_flags(straight, run_name="split", total_env_steps=2 * straight.env_steps_per_update))
    run_script(sfl, with_flags(straight, run_name="split", resume=True))
    states = [newest_state(sfl, straight, tmp_path / name) for name in ("straight", "split")]
    assert int(states[0].update[0]) == 8 and float(states[0].learnability.max()) > 0
    assert_states_close(*states)


@pytest.mark.slow
def test_refreshes_keep_their_schedule_across_a_resume(tmp_path):
    """Stopped at update 6, between two refreshes (every 4 updates), and resumed: the buffer is rebuilt at 8 as
    it would have been, and at no other update."""
    config = with_flags(sfl.Config(), **{**TINY, "total_updates": 12}, runs_dir=str(tmp_path), run_name="r")
    run_script(sfl, with_flags(config, total_env_steps=6 * config.env_steps_per_update))
    run_dir = run_script(sfl, with_flags(config, resume=True))
    with open(run_dir / "logs.csv") as file:
        rows = [row for row in csv.DictReader(file) if row["seed"] == "0"]
    updates = [int(row["update"]) for row in rows]
    assert updates == list(range(2, 13, 2))
    interval, chunk = TINY["refresh_interval"], TINY["log_interval"]
    refreshed = [float(row["sfl/refreshed_at"]) for row in rows]
    assert refreshed == [interval * ((update - chunk) // interval) for update in updates]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (dict(buffer_size=40), "--buffer-size \\(40\\) must not exceed the levels scored per refresh"),
        (dict(buffer_fraction=1.5), "--buffer-fraction must be in \\[0, 1\\]"),
        (dict(refresh_interval=3), "--refresh-interval \\(3\\) must be a multiple of --log-interval \\(2\\)"),
        (dict(score_steps=7), "--score-steps \\(7\\) must be at least --max-steps \\(8\\)"),
    ],
)
def test_invalid_combinations_fail_in_one_line(flags, message):
    with pytest.raises(ConfigError, match=message):
        with_flags(sfl.Config(), **{**TINY, **flags})


def test_cli_refuses_a_buffer_larger_than_the_scored_levels(tmp_path):
    result = subprocess.run(
        [sys.executable, "algos/sfl.py", "--buffer-size", "30000", "--runs-dir", str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "--buffer-size (30000) must not exceed" in lines[0]
    assert not list(tmp_path.iterdir())
