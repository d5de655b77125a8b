"""Update parity with minimax-lib 0.2.0: one recorded student update of its DR and Robust PLR runners, and its
level scores, reproduced with cleanued's learner (`algos/dr.py`: the network, `compute_gae`, `ppo_loss`,
`ppo_update`; `algos/plr.py:level_scores`; `common/ued_scores.py`).

The fixtures (tests/fixtures/minimax_update_{dr,plr}.npz, minimax_scores.npz) hold minimax's parameters and
Adam state before and after the update, named as cleanued's parameter tree, the rollout batch with the LSTM
carry it started from, GAE, the loss and gradient of the first epoch and the update's statistics; they are
recorded by benchmarks/learning/minimax_fixtures.py (minimax's own venv) and only read here. Where cleanued's learner
differs by design, the test states the difference and checks its size (see `test_*_differs_*`)."""

import functools
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training.train_state import TrainState

from algos import dr, plr
from benchmarks.learning.minimax_params import parameter_tree
from common import level_buffer, ued_scores
from envs.maze import Observation

FIXTURES = Path(__file__).resolve().parent / "fixtures"
UPDATES = ("minimax_update_dr.npz", "minimax_update_plr.npz")


@functools.cache
def load(name: str) -> dict:
    data = np.load(FIXTURES / name)
    return {key: data[key] for key in data.files}


def settings_of(data) -> dict:
    return json.loads(str(data["meta"]))


def make_optimizer(settings) -> optax.GradientTransformation:
    return optax.chain(
        optax.clip_by_global_norm(settings["max_grad_norm"]), optax.adam(settings["lr"], eps=settings["adam_eps"])
    )


def train_state_of(data, when: str) -> TrainState:
    """cleanued's TrainState holding minimax's parameters and Adam moments `before` or `after` the update."""
    settings = settings_of(data)
    network = dr.ActorCritic()
    state = TrainState.create(
        apply_fn=network.apply, params=parameter_tree(data, f"params_{when}/"), tx=make_optimizer(settings)
    )
    clip, (adam, scale) = state.opt_state
    adam = adam._replace(
        count=jnp.asarray(data[f"opt_{when}/count"], adam.count.dtype),
        mu=parameter_tree(data, f"opt_{when}/mu/"),
        nu=parameter_tree(data, f"opt_{when}/nu/"),
    )
    return state.replace(opt_state=(clip, (adam, scale)))


def transitions_of(data) -> dr.Transition:
    dones = jnp.asarray(data["dones"])
    # minimax shifts the done flags by one step for the LSTM (its `_loss`); the first step's flag is the
    # rollout's initial `done` (False: the carry is not reset there).
    reset = jnp.concatenate([jnp.asarray(data["initial_reset"])[None], dones[:-1]])
    return dr.Transition(
        obs=Observation(image=jnp.asarray(data["obs_image"]), agent_dir=jnp.asarray(data["obs_dir"], jnp.int32)),
        reset=reset,
        action=jnp.asarray(data["actions"], jnp.int32),
        log_prob=jnp.asarray(data["log_probs"]),
        value=jnp.asarray(data["values"]),
        reward=jnp.asarray(data["rewards"]),
        done=dones,
    )


def carry_of(data):
    return jnp.asarray(data["carry_c"]), jnp.asarray(data["carry_h"])


def ppo_settings(settings) -> dr.PPOSettings:
    return dr.PPOSettings(
        settings["clip_eps"],
        settings["vf_coef"],
        settings["ent_coef"],
        settings["num_epochs"],
        settings["num_minibatches"],
    )


def leaves(tree_a, tree_b):
    flat_a, flat_b = jax.tree_util.tree_flatten_with_path(tree_a)[0], jax.tree_util.tree_flatten_with_path(tree_b)[0]
    assert [path for path, _ in flat_a] == [path for path, _ in flat_b]
    return [
        (jax.tree_util.keystr(path), np.asarray(a), np.asarray(b))
        for (path, a), (_, b) in zip(flat_a, flat_b, strict=True)
    ]


def max_relative_difference(tree_a, tree_b) -> tuple[float, str]:
    """Largest |a - b| / (max |b| of the leaf + 1e-12) over leaves, and the leaf."""
    worst = (0.0, "")
    for name, a, b in leaves(tree_a, tree_b):
        difference = float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) + 1e-12))
        worst = max(worst, (difference, name))
    return worst


@pytest.mark.parametrize("name", UPDATES)
def test_fixture_is_a_real_update(name):
    data = load(name)
    settings = settings_of(data)
    assert settings["minimax-lib"] == "0.2.0" and settings["num_minibatches"] == 1
    assert data["rewards"].sum() > 0 and data["dones"].any(0).all(), "a goal is reached and every env ends an episode"
    assert int(data["opt_after/count"]) == int(data["opt_before/count"]) + settings["num_epochs"]


@pytest.mark.parametrize("name", UPDATES)
def test_network_reproduces_the_rollouts_values_and_log_probs(name):
    """cleanued's ActorCritic with minimax's parameters (renamed only) on the recorded observations, from the
    recorded carry: the same values and log-probabilities the rollout recorded step by step."""
    data = load(name)
    params = parameter_tree(data, "params_before/")
    transitions = transitions_of(data)
    _, logits, values = jax.jit(dr.ActorCritic().apply)(params, carry_of(data), transitions.obs, transitions.reset)
    log_probs = jnp.take_along_axis(jax.nn.log_softmax(logits), transitions.action[..., None], -1)[..., 0]
    np.testing.assert_allclose(values, data["values"], atol=2e-6)
    np.testing.assert_allclose(log_probs, data["log_probs"], atol=2e-6)


@pytest.mark.parametrize("name", UPDATES)
def test_gae_matches(name):
    data = load(name)
    settings = settings_of(data)
    advantages, targets = dr.compute_gae(
        transitions_of(data), jnp.asarray(data["last_value"]), settings["gamma"], settings["gae_lambda"]
    )
    np.testing.assert_allclose(advantages, data["advantages"], atol=1e-6)
    np.testing.assert_allclose(targets, data["targets"], atol=1e-6)


def loss_and_gradient(data):
    network = dr.ActorCritic()
    loss = functools.partial(
        dr.ppo_loss,
        network=network,
        carry=carry_of(data),
        transitions=transitions_of(data),
        advantages=jnp.asarray(data["advantages"]),
        targets=jnp.asarray(data["targets"]),
        settings=ppo_settings(settings_of(data)),
    )
    (value, metrics), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(parameter_tree(data, "params_before/"))
    return value, metrics, grads


@pytest.mark.parametrize("name", UPDATES)
def test_loss_terms_match(name):
    data = load(name)
    value, metrics, _ = loss_and_gradient(data)
    np.testing.assert_allclose(metrics["ppo/value_loss"], data["grad_value_loss"], rtol=1e-5)
    np.testing.assert_allclose(metrics["ppo/entropy"], data["grad_entropy"], rtol=1e-5)
    # At the first epoch the ratio is 1, so the policy term is -mean(normalised advantages) = 0 on both sides
    # up to rounding.
    np.testing.assert_allclose(metrics["ppo/policy_loss"], data["grad_actor_loss"], atol=1e-6)
    np.testing.assert_allclose(value, data["grad_loss"], atol=1e-6)


@pytest.mark.parametrize("name", UPDATES)
def test_gradient_matches(name):
    """The gradient of the first epoch at minimax's starting parameters, leaf by leaf, to float rounding (the
    advantage normalisation uses minimax's epsilon, 1e-5)."""
    data = load(name)
    _, _, grads = loss_and_gradient(data)
    tolerance = 2e-5
    difference, leaf = max_relative_difference(grads, parameter_tree(data, "grad/"))
    assert difference < tolerance, f"{leaf}: relative difference {difference:.2e} (tolerance {tolerance:.1e})"


@pytest.mark.parametrize("name", UPDATES)
def test_ppo_update_matches(name):
    """minimax's whole update (5 epochs, one minibatch, global-norm clip 0.5, Adam) from the same parameters,
    Adam moments and batch: the same parameters and moments after it."""
    data = load(name)
    settings = settings_of(data)
    network = dr.ActorCritic()
    update = jax.jit(functools.partial(dr.ppo_update, network=network, settings=ppo_settings(settings)))
    after, metrics = update(
        jax.random.key(0),
        train_state_of(data, "before"),
        carry=carry_of(data),
        transitions=transitions_of(data),
        advantages=jnp.asarray(data["advantages"]),
        targets=jnp.asarray(data["targets"]),
    )
    expected = train_state_of(data, "after")
    difference, leaf = max_relative_difference(after.params, expected.params)
    assert difference < 2e-4, f"parameters, {leaf}: relative difference {difference:.2e}"
    for part, ours, theirs in (
        ("mu", after.opt_state[1][0].mu, expected.opt_state[1][0].mu),
        ("nu", after.opt_state[1][0].nu, expected.opt_state[1][0].nu),
    ):
        difference, leaf = max_relative_difference(ours, theirs)
        assert difference < 2e-3, f"Adam {part}, {leaf}: relative difference {difference:.2e}"
    assert int(after.opt_state[1][0].count) == int(data["opt_after/count"])
    np.testing.assert_allclose(metrics["ppo/value_loss"], data["stats_value_loss"], rtol=1e-3)
    np.testing.assert_allclose(metrics["ppo/entropy"], data["stats_entropy"], rtol=1e-4)
    np.testing.assert_allclose(metrics["ppo/grad_norm"], data["stats_grad_norm"], rtol=1e-3)


def test_dr_carry_differs_from_cleaneds_zero_start():
    """minimax's DRRunner starts each tick from the previous tick's final LSTM carry without resetting it;
    cleanued's DR starts every update from zeros with reset=True. On the recorded batch that changes the
    policy's first steps: the carry is not zero and the values differ."""
    data = load("minimax_update_dr.npz")
    assert np.abs(data["carry_h"]).max() > 1e-3
    transitions = transitions_of(data)
    zero_start = transitions._replace(reset=transitions.reset.at[0].set(True))
    _, _, values = jax.jit(dr.ActorCritic().apply)(
        parameter_tree(data, "params_before/"),
        dr.initial_carry(*data["carry_h"].shape),
        zero_start.obs,
        zero_start.reset,
    )
    first_episode = np.cumsum(data["dones"], 0) - data["dones"] == 0
    assert np.abs(np.asarray(values) - data["values"])[first_episode].max() > 1e-4
    assert np.abs(np.asarray(values) - data["values"])[~first_episode].max() < 2e-6


# --- level scores


def test_plr_level_scores_match():
    """`algos/plr.py:level_scores` on the replayed levels' batch: MaxMC against the slots' stored max returns,
    positive value loss and L1 value loss; and the max return minimax stores (this rollout's best)."""
    data = load("minimax_update_plr.npz")
    transitions, advantages = transitions_of(data), jnp.asarray(data["advantages"])
    stored = jnp.asarray(np.where(np.isfinite(data["stored_max_returns"]), data["stored_max_returns"], 0.0))
    assert (data["level_slots"] >= 0).all(), "a replay batch"
    no_counts = jnp.zeros(stored.shape, jnp.int32)
    before = level_buffer.LevelHistory(stored, no_counts, no_counts)

    def level_scores(score_function, running_max):  # these scores read neither the levels nor the episode limit
        return plr.level_scores(transitions, advantages, None, before, score_function, running_max, 1.0, None)

    for score_function, expected in (("max_mc", "max_mc"), ("pvl", "pvl"), ("l1_value_loss", "l1_value_loss")):
        for running_max in (False, True):  # the score is the same; only what the slot keeps differs
            scores, _ = level_scores(score_function, running_max)
            np.testing.assert_allclose(scores, data[expected], atol=1e-6, err_msg=score_function)
    _, kept = level_scores("max_mc", running_max=False)
    np.testing.assert_allclose(kept.max_return, data["max_mc_rollout_max_return"], atol=1e-6)
    _, kept = level_scores("max_mc", running_max=True)
    np.testing.assert_allclose(kept.max_return, np.maximum(stored, data["max_mc_rollout_max_return"]), atol=1e-6)


@pytest.mark.parametrize("case", range(4))
def test_ued_scores_match_on_random_batches(case):
    data, prefix = load("minimax_scores.npz"), f"s{case}_"
    per_env = lambda name: jnp.asarray(data[prefix + name]).T  # noqa: E731  [envs, steps]
    rewards, dones, values, advantages = map(per_env, ("rewards", "dones", "values", "advantages"))
    stored = data[prefix + "stored_max_returns"]
    completed = np.asarray(dones.any(1))
    # minimax scores an env that finished no episode -inf (ignored by the buffer); cleanued scores it 0 and
    # the caller passes `active` (whether an episode finished).
    for name, ours in (
        ("pvl", jax.vmap(ued_scores.positive_value_loss)(advantages, dones)),
        ("l1_value_loss", jax.vmap(ued_scores.l1_value_loss)(advantages, dones)),
    ):
        np.testing.assert_array_equal(np.isfinite(data[prefix + name]), completed)
        np.testing.assert_allclose(np.asarray(ours)[completed], data[prefix + name][completed], atol=1e-6, err_msg=name)
    # New levels have no stored max return (minimax -inf, cleanued 0: returns are never negative).
    scores, best = jax.vmap(ued_scores.max_mc)(rewards, dones, values, jnp.asarray(np.maximum(stored, 0.0)))
    np.testing.assert_allclose(np.asarray(scores)[completed], data[prefix + "max_mc"][completed], atol=1e-6)
    np.testing.assert_allclose(np.asarray(best)[completed], data[prefix + "max_mc_rollout_max_return"][completed])
    _, running = jax.vmap(functools.partial(ued_scores.max_mc, running_max=True))(
        rewards, dones, values, jnp.asarray(np.maximum(stored, 0.0))
    )
    np.testing.assert_allclose(
        np.asarray(running)[completed], np.maximum(stored, data[prefix + "max_mc_rollout_max_return"])[completed]
    )
