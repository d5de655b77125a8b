"""benchmarks/learning/replay_spread.py on tiny synthetic buffers and a stubbed replay script: a buffer's figures are
those counted by hand from its scores, ages and filled slots (proportional replay probabilities written out, one
replay batch drawn as the script draws it); two success-rate estimates agree as computed here in plain Python; the
outcome lag plays each of the first filled slots --lag-attempts times in two independent streams and sets the stored
p against the fresh ones; main hands the replay script its flags, reads the buffer after every chunk and prints one
line per chunk, the lag line when asked, and the summary."""

import json
import statistics
import types
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos import plr
from benchmarks.learning import replay_spread as rs
from common import level_buffer
from common.config import flags_of, with_flags
from envs.maze import make_level

SCORES = [0.4, 0.0, 0.2, 0.4, 0.0, 0.1, -0.2, 0.9, 0.9, 0.4]
AGES = [3, 1, 0, 2, 5, 1, 4, 0, 0, 0]
FILLED = [True] * 7 + [False] * 3


def synthetic_buffer(scores=SCORES, ages=AGES, filled=FILLED) -> level_buffer.LevelBuffer:
    """A buffer holding the given slots; level k has its goal at column k % 5 (levels are not read)."""
    capacity = len(scores)
    goals = np.stack([np.arange(capacity) % 5, np.zeros(capacity, int)], -1)
    levels = make_level(np.zeros((capacity, 5, 5), bool), goals, np.ones((capacity, 2), int), np.zeros(capacity, int))
    buffer = level_buffer.empty_buffer(jax.tree.map(lambda x: x[0], levels), capacity)
    return buffer.replace(
        levels=levels,
        scores=jnp.asarray(scores, jnp.float32),
        ages=jnp.asarray(ages, jnp.int32),
        filled=jnp.asarray(filled),
    )


def plain_probabilities(temperature: float, staleness_coef: float) -> list[float]:
    """Proportional prioritization by hand (docs/methods.md): over filled slots P_score is max(score, 0)^(1/T)
    normalised, P_staleness is age / sum(age), and P mixes them by the staleness coefficient; empty slots 0."""
    weights = [
        max(score, 0.0) ** (1 / temperature) if full else 0.0 for score, full in zip(SCORES, FILLED, strict=True)
    ]
    ages = [age if full else 0 for age, full in zip(AGES, FILLED, strict=True)]
    return [
        (1 - staleness_coef) * weight / sum(weights) + staleness_coef * age / sum(ages)
        for weight, age in zip(weights, ages, strict=True)
    ]


def test_figures_are_those_counted_by_hand():
    """Seven filled slots of ten (two empty ones with the highest scores, one with the top filled one), two tied at
    the top score, one negative
    score (non-zero, but no score weight under proportional prioritization): the shares, the replay probability
    on non-zero slots, the largest probability and effective number of levels from the probabilities written out,
    and the batch's figures from the 16 slots the same key draws. Mutation checked by hand: counting empty slots
    as filled, positive scores as the non-zero ones, the top score over empty slots too, sum p for sum p^2, or the
    batch drawn with another key or of another size fails this test."""
    settings = dict(temperature=0.5, staleness_coef=0.4, prioritization="proportional", ties="shared")
    rng = jax.random.key(3)
    figures = rs.replay_spread(synthetic_buffer(), settings, 16, rng)
    probs = plain_probabilities(0.5, 0.4)
    nonzero = [full and score != 0 for score, full in zip(SCORES, FILLED, strict=True)]
    _, drawn = level_buffer.sample_replay(rng, synthetic_buffer(), 16, **settings)
    drawn = [int(slot) for slot in drawn]
    assert len(drawn) == 16 and all(probs[slot] > 0 for slot in drawn)
    assert figures["fill"] == pytest.approx(0.7)
    assert figures["nonzero_score_share"] == pytest.approx(5 / 7)
    assert figures["replay_on_nonzero"] == pytest.approx(
        sum(p for p, keep in zip(probs, nonzero, strict=True) if keep), rel=1e-5
    )
    assert figures["largest_probability"] == pytest.approx(max(probs), rel=1e-5)
    assert figures["effective_levels"] == pytest.approx(1 / sum(p * p for p in probs), rel=1e-5)
    assert figures["top_score_ties"] == 2
    assert figures["batch_distinct_levels"] == len(set(drawn))
    assert figures["batch_nonzero_draws"] == pytest.approx(sum(nonzero[slot] for slot in drawn) / 16)


def test_an_empty_buffer_has_no_share_and_no_top_score():
    """Nothing filled: no division by zero, no top score, no non-zero draw. Mutation checked by hand: dividing by
    the filled count unguarded, or the top score taken over an empty selection, fails this test."""
    settings = dict(temperature=0.3, staleness_coef=0.3, prioritization="rank", ties="shared")
    figures = rs.replay_spread(synthetic_buffer(filled=[False] * 10), settings, 4, jax.random.key(0))
    assert figures["fill"] == 0.0 and figures["nonzero_score_share"] == 0.0 and figures["replay_on_nonzero"] == 0.0
    assert figures["top_score_ties"] == 0 and figures["batch_nonzero_draws"] == 0.0


def plain_agreement(first: list[float], second: list[float]) -> dict:
    """estimate_agreement written out: learnability p (1 - p); the top tenth by `first` is the slots at or above
    its 0.9 quantile (linear interpolation between order statistics); Pearson's correlation by statistics."""
    count = len(first)
    learn_first, learn_second = [p * (1 - p) for p in first], [p * (1 - p) for p in second]
    ordered, position = sorted(learn_first), 0.9 * (count - 1)
    low = int(position)
    threshold = ordered[low] + (position - low) * (ordered[min(low + 1, count - 1)] - ordered[low])
    top = [i for i in range(count) if learn_first[i] >= threshold]
    return {
        "mean_abs_p_difference": sum(abs(b - a) for a, b in zip(first, second, strict=True)) / count,
        "mean_abs_learnability_difference": sum(abs(b - a) for a, b in zip(learn_first, learn_second, strict=True))
        / count,
        "learnability_correlation": statistics.correlation(learn_first, learn_second),
        "top_decile_by_first_mastered_or_failed_by_second": sum(second[i] >= 0.9 or second[i] <= 0.1 for i in top)
        / len(top),
    }


def test_estimate_agreement_against_plain_python():
    """21 slots (the 0.9 quantile falls on an order statistic, so three slots are at or above it); of the top
    three by the first estimate the second has one at exactly 0.9, one at exactly 0.1 and one at 0.5: two thirds
    mastered or failed. Mutation checked by hand: > for >= at the quantile or at either bound, the top tenth by the
    second estimate, or correlating p rather than p (1 - p) fails this test."""
    rng = np.random.default_rng(5)
    first = [float(p) for p in np.round(rng.uniform(0.0, 0.5, 21), 3)]
    assert len({p * (1 - p) for p in first}) == 21  # distinct learnabilities: the top three are well defined
    second = [float(p) for p in np.round(rng.uniform(0.2, 0.8, 21), 3)]
    top = sorted(range(21), key=lambda i: first[i] * (1 - first[i]))[-3:]
    for slot, value in zip(top, (0.9, 0.1, 0.5), strict=True):
        second[slot] = value
    expected = plain_agreement(first, second)
    assert expected["top_decile_by_first_mastered_or_failed_by_second"] == pytest.approx(2 / 3)
    ours = rs.estimate_agreement(np.array(first), np.array(second))
    assert ours == pytest.approx(expected, rel=1e-9)


# --- outcome_lag: a stubbed replay script whose buffer (six slots, four filled) is played by a stubbed play_levels

ATTEMPTS, SEED = 4, 5
WINS = {0: [4, 2], 2: [1, 0], 3: [2, 3]}
"""Per slot, how many of its ATTEMPTS attempts succeed in stream 0 and in stream 1."""


def lag_runner():
    buffer = synthetic_buffer(scores=[0.0] * 6, ages=[0] * 6, filled=[True, False, True, True, False, True])
    buffer = buffer.replace(
        levels=buffer.levels.replace(goal_pos=jnp.stack([jnp.arange(6), jnp.zeros(6, int)], -1)),  # goal column: slot
        successes=jnp.array([3.0, 5.0, 0.0, 1.0, 5.0, 2.0]),
        failures=jnp.array([1.0, 5.0, 0.0, 3.0, 5.0, 2.0]),
    )
    return types.SimpleNamespace(
        buffer=jax.tree.map(lambda x: x[None], buffer), params={"w": jnp.arange(6.0).reshape(2, 3)}
    )


def test_outcome_lag_plays_the_first_filled_slots_in_two_streams(monkeypatch):
    """--lag-levels 3 takes slots 0, 2 and 3 (slot 1 is empty; slot 2 was never counted: stored p 0). The stub lets
    attempt a of a slot succeed while a is below that slot's wins in the stream (told apart by the key): the fresh rates
    are the wins over 4, and the figures are plain_agreement of stored against now and of now again against now (each
    pair's top slot by the first is mastered or failed by the second, the other way round not). Mutation checked by
    hand: tiling the levels instead of repeating each, one stream for both, the stored rate as successes over
    failures, the seed not reaching the keys, the last slots instead of the first, or the two agreements' arguments
    swapped fails this test."""
    seen = []
    apply = object()

    def play_levels(rng, apply_fn, params, carry, levels, env_params, max_steps):
        seen.append((apply_fn, params["w"].shape, carry[0].shape, env_params, max_steps))
        slot = levels.goal_pos[:, 0]
        attempt = jnp.arange(slot.shape[0]) % ATTEMPTS
        second = (jax.random.key_data(rng) == jax.random.key_data(jax.random.fold_in(jax.random.key(SEED), 1))).all()
        wins = jnp.zeros((2, 6), int).at[:, jnp.array(list(WINS))].set(jnp.array(list(WINS.values())).T)
        won = attempt < wins[second.astype(int), slot]
        return types.SimpleNamespace(returns=jnp.where(won, 0.8, 0.0))

    monkeypatch.setattr(rs.heldout_eval, "play_levels", play_levels)
    module = types.SimpleNamespace(
        initial_carry=plr.initial_carry, ActorCritic=lambda: types.SimpleNamespace(apply=apply)
    )
    config = types.SimpleNamespace(
        ppo=types.SimpleNamespace(lstm_size=7), env_params="params", env=types.SimpleNamespace(max_steps=37)
    )
    functions = types.SimpleNamespace(policies={"student": lambda runner: runner.params})
    args = rs.Args(lag_levels=3, lag_attempts=ATTEMPTS, seed=SEED)
    figures = rs.outcome_lag(module, config, functions, lag_runner(), args)
    assert seen == [(apply, (3,), (12, 7), "params", 37)]  # one trace: the same program plays both streams
    stored = [3 / 4, 0.0, 1 / 4]
    now = [WINS[slot][0] / ATTEMPTS for slot in (0, 2, 3)]
    again = [WINS[slot][1] / ATTEMPTS for slot in (0, 2, 3)]
    assert figures["lag_levels"] == 3 and figures["lag_attempts"] == ATTEMPTS
    assert figures["mean_episodes_counted"] == pytest.approx(8 / 3)
    assert figures["p_stored_mean"] == pytest.approx(sum(stored) / 3)
    assert figures["p_now_mean"] == pytest.approx(sum(now) / 3)
    assert figures["stored_vs_now"] == pytest.approx(plain_agreement(stored, now))
    assert figures["now_vs_now_again"] == pytest.approx(plain_agreement(again, now))


# --- main: a stubbed replay script (the real plr.Config, a fake make_train whose buffer fills two slots a chunk)


class FakeRunner(NamedTuple):
    buffer: level_buffer.LevelBuffer
    chunks: jax.Array


def fake_script(made: list):
    """A replay script whose Config is plr's at 16 envs, and whose make_train records the config and the keys' shape."""

    def make_train(config):
        made.append(config)
        empty = synthetic_buffer(scores=[0.5, 0.1, 0.0, 0.3, 0.2, 0.0, 0.4, 0.6], ages=[1] * 8, filled=[False] * 8)

        def init(rngs):
            made.append(rngs.shape)
            return FakeRunner(jax.tree.map(lambda x: jnp.stack([x] * rngs.shape[0]), empty), jnp.zeros(()))

        def step(runner):
            chunks = runner.chunks + 1
            filled = (jnp.arange(8) < 2 * chunks)[None]
            metrics = {"buffer/replay_fraction": jnp.array([jnp.nan, 0.5, 0.25])}
            return FakeRunner(runner.buffer.replace(filled=filled), chunks), metrics

        return types.SimpleNamespace(init=init, step=step)

    return types.SimpleNamespace(Config=lambda: with_flags(plr.Config(), num_envs=16), make_train=make_train)


@pytest.mark.parametrize("lag_levels", [0, 2])
def test_main_trains_the_given_script_and_prints_a_line_per_chunk(monkeypatch, capsys, lag_levels):
    """75 updates at 25 a chunk: three lines, at updates 25, 50 and 75, each the figures of that chunk's buffer (2, 4, 6
    of 8 slots filled) with the chunk's key and a batch of the script's --num-envs draws (16 here), and the NaN-skipping
    mean replay fraction; the lag line only with --lag-levels; the summary with the arguments. The script gets every
    flag given here (none at its default) and one seed, no evaluation or screenshots, a checkpoint per chunk. Mutation
    checked by hand: any flag not passed, two seeds, a batch of 32, one chunk more, the update number of the
    chunk before, every chunk read with one key, a plain mean of the replay fraction, or the lag line without
    --lag-levels fails this test."""
    made, lagged = [], []
    monkeypatch.setattr(
        rs, "importlib", types.SimpleNamespace(import_module=lambda name: made.append(name) or fake_script(made))
    )
    monkeypatch.setattr(rs, "outcome_lag", lambda *given: lagged.append(given) or {"lag_levels": given[-1].lag_levels})
    monkeypatch.setattr(rs, "describe_environment", lambda: {"device": "stub"})
    args = rs.Args(
        algo="accel",
        score_function="learnability",
        prioritization="proportional",
        total_updates=75,
        log_interval=25,
        buffer_size=48,
        maze_size=9,
        n_walls=20,
        lstm_size=32,
        learnability_decay=0.5,
        seed=3,
        lag_levels=lag_levels,
    )
    rs.main(args)
    name, config, keys = made
    assert name == "algos.accel" and keys == (1,)
    flags = flags_of(config)
    given = {field: getattr(args, field) for field in ("score_function", "prioritization", "buffer_size", "maze_size")}
    given |= {field: getattr(args, field) for field in ("n_walls", "lstm_size", "learnability_decay", "seed")}
    given |= dict(total_updates=75, log_interval=25, num_seeds=1, eval_interval=0, checkpoint_interval=25)
    given |= dict(screenshot_interval=0, total_student_updates=None)
    assert {field: flags[field] for field in given} == given
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    rows, summary = lines[:3], lines[-1]
    assert [row["update"] for row in rows] == [25, 50, 75]
    for chunk, row in enumerate(rows):
        assert row.pop("replay_fraction") == pytest.approx(0.375)
        buffer = synthetic_buffer(scores=[0.5, 0.1, 0.0, 0.3, 0.2, 0.0, 0.4, 0.6], ages=[1] * 8, filled=[False] * 8)
        buffer = buffer.replace(filled=jnp.arange(8) < 2 * (chunk + 1))
        key = jax.random.fold_in(jax.random.key(3), chunk)
        expected = rs.replay_spread(buffer, config.buffer_settings, 16, key)
        assert row == {"update": 25 * (chunk + 1), **expected}
        assert row["fill"] == (chunk + 1) / 4
    assert lines[3:-1] == ([{"lag_levels": 2}] if lag_levels else [])
    assert len(lagged) == (1 if lag_levels else 0)
    assert summary["args"] == json.loads(json.dumps(vars(args))) and summary["device"] == "stub"
