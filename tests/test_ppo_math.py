"""The learner's math pinned by small deterministic cases (CleanRL's habit): GAE against a plain-Python loop and a
hand-computed rollout, the PPO loss against a plain-Python computation of a small batch (the ratio clipped on
both sides, value clipping on both sides, the entropy bonus, advantage normalisation), a fresh minibatch split each
epoch, the annealed learning rate over every gradient step, and the solve rate's time-outs. Every algos/ script
copies these from algos/dr.py (tests/test_copies.py keeps the copies equal), so testing dr.py's covers all."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training.train_state import TrainState

from algos import dr
from common.config import with_flags


def transitions_of(reward, value, done, **fields) -> dr.Transition:
    empty = jnp.zeros_like(jnp.asarray(reward))
    values = dict(obs=None, reset=None, action=empty.astype(jnp.int32), log_prob=empty)
    values.update(fields)
    return dr.Transition(
        **values, value=jnp.asarray(value, jnp.float32), reward=jnp.asarray(reward, jnp.float32), done=jnp.asarray(done)
    )


def test_gae_by_hand():
    # gamma = lambda = 0.5; the episode ends at t = 1 (no bootstrap through it), t = 2 bootstraps from 0.4.
    transitions = transitions_of([[0.0], [0.0], [1.0]], [[0.1], [0.2], [0.3]], [[False], [True], [False]])
    advantages, targets = dr.compute_gae(transitions, jnp.array([0.4]), 0.5, 0.5)
    # t=2: 1 + 0.5 * 0.4 - 0.3 = 0.9; t=1: 0 - 0.2 = -0.2; t=0: 0.5 * 0.2 - 0.1 + 0.25 * (-0.2) = -0.05
    np.testing.assert_allclose(advantages[:, 0], [-0.05, -0.2, 0.9], atol=1e-6)
    np.testing.assert_allclose(targets[:, 0], [0.05, 0.0, 1.2], atol=1e-6)


def test_gae_matches_a_plain_python_loop():
    rng = np.random.default_rng(0)
    steps, envs, gamma, lam = 12, 3, 0.99, 0.95
    reward = rng.uniform(size=(steps, envs)).astype(np.float32)
    value = rng.normal(size=(steps, envs)).astype(np.float32)
    done = rng.uniform(size=(steps, envs)) < 0.2
    done[steps - 1, 0], done[:, 1] = True, False  # env 0 ends on the last step, env 1 never ends
    last_value = rng.normal(size=envs).astype(np.float32)
    advantages, targets = dr.compute_gae(transitions_of(reward, value, done), jnp.asarray(last_value), gamma, lam)
    for env in range(envs):
        gae, next_value = 0.0, float(last_value[env])
        for t in reversed(range(steps)):
            if done[t, env]:
                gae, next_value = 0.0, 0.0
            delta = reward[t, env] + gamma * next_value - value[t, env]
            gae = delta + gamma * lam * gae
            assert advantages[t, env] == pytest.approx(gae, abs=1e-5)
            assert targets[t, env] == pytest.approx(gae + value[t, env], abs=1e-5)
            next_value = float(value[t, env])


class FixedOutputs:
    """A stand-in network whose logits and values are its parameters, so the loss is a function of them alone."""

    def apply(self, params, carry, obs, reset):
        return carry, params["logits"], params["value"]


def reference_loss(logits, value, action, old_log_prob, old_value, advantages, targets, settings):
    """The PPO loss written out sample by sample."""
    samples = [(t, b) for t in range(len(action)) for b in range(len(action[0]))]
    mean = sum(advantages[t][b] for t, b in samples) / len(samples)
    std = math.sqrt(sum((advantages[t][b] - mean) ** 2 for t, b in samples) / len(samples))
    policy, values, entropy = 0.0, 0.0, 0.0
    for t, b in samples:
        norm = math.log(sum(math.exp(x) for x in logits[t][b]))
        log_probs = [x - norm for x in logits[t][b]]
        entropy -= sum(math.exp(lp) * lp for lp in log_probs)
        ratio = math.exp(log_probs[action[t][b]] - old_log_prob[t][b])
        advantage = (advantages[t][b] - mean) / (std + 1e-5)
        clipped = min(max(ratio, 1 - settings.clip_eps), 1 + settings.clip_eps)
        policy -= min(ratio * advantage, clipped * advantage)
        clipped_value = old_value[t][b] + min(max(value[t][b] - old_value[t][b], -settings.clip_eps), settings.clip_eps)
        values += 0.5 * max((value[t][b] - targets[t][b]) ** 2, (clipped_value - targets[t][b]) ** 2)
    count = len(samples)
    return policy / count + settings.vf_coef * values / count - settings.ent_coef * entropy / count


def test_ppo_loss_matches_a_plain_computation():
    settings = dr.PPOSettings(clip_eps=0.2, vf_coef=0.5, ent_coef=0.01, num_epochs=1, num_minibatches=1)
    logits = [[[0.0, 1.0, -1.0], [2.0, 0.0, 0.0]], [[0.5, 0.5, 0.5], [-1.0, 3.0, 0.0]]]  # [T=2, B=2, A=3]
    action = [[2, 0], [2, 1]]
    old_log_prob = [[-1.7, -2.5], [-1.1, -0.3]]  # ratios about 0.49, 9.6, 1.0 and 1.26
    # Normalised, the first advantage is negative and the second positive: the clip binds below 0.8 for the
    # first sample and above 1.2 for the second.
    advantages = [[-1.0, 0.5], [0.3, -2.0]]
    old_value = [[0.0, 1.0], [0.5, -0.5]]
    value = [[0.5, 1.05], [0.4, -0.1]]  # the first and last move more than clip_eps from the old value
    targets = [[1.0, 1.0], [0.0, 0.2]]
    transitions = transitions_of(
        jnp.zeros((2, 2)),
        old_value,
        jnp.zeros((2, 2), bool),
        action=jnp.asarray(action),
        log_prob=jnp.asarray(old_log_prob, jnp.float32),
    )
    params = {"logits": jnp.asarray(logits), "value": jnp.asarray(value)}
    loss, metrics = dr.ppo_loss(
        params, FixedOutputs(), None, transitions, jnp.asarray(advantages), jnp.asarray(targets), settings
    )
    expected = reference_loss(logits, value, action, old_log_prob, old_value, advantages, targets, settings)
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    assert float(metrics["ppo/clip_frac"]) == pytest.approx(0.75), "three of four ratios lie outside [0.8, 1.2]"
    assert float(metrics["ppo/mean_value"]) == pytest.approx(np.mean(value)), "the new predictions, as minimax's"
    assert float(metrics["ppo/mean_target"]) == pytest.approx(np.mean(targets))
    # Every term matters: the loss changes with each coefficient.
    for changed in (settings._replace(clip_eps=0.3), settings._replace(vf_coef=1.0), settings._replace(ent_coef=0.1)):
        other, _ = dr.ppo_loss(
            params, FixedOutputs(), None, transitions, jnp.asarray(advantages), jnp.asarray(targets), changed
        )
        expected = reference_loss(logits, value, action, old_log_prob, old_value, advantages, targets, changed)
        assert float(other) == pytest.approx(expected, rel=1e-5) and abs(float(other) - float(loss)) > 1e-4


class LinearOutputs:
    """A stand-in network with logits and value linear in a 1-feature observation, so minibatches slice it."""

    def apply(self, params, carry, obs, reset):
        return carry, obs * params["logits"], obs[..., 0] * params["value"]


def test_ppo_update_takes_epochs_times_minibatches_steps():
    settings = dr.PPOSettings(clip_eps=0.2, vf_coef=0.5, ent_coef=0.0, num_epochs=3, num_minibatches=2)
    obs = jnp.ones((2, 4, 1))
    transitions = transitions_of(jnp.zeros((2, 4)), jnp.zeros((2, 4)), jnp.zeros((2, 4), bool), obs=obs)
    params = {"logits": jnp.zeros(3), "value": jnp.zeros(())}
    state = TrainState.create(apply_fn=None, params=params, tx=optax.sgd(0.1))
    targets = jnp.arange(8.0).reshape(2, 4)
    state, metrics = dr.ppo_update(
        jax.random.key(0), state, LinearOutputs(), None, transitions, targets, targets, settings
    )
    assert int(state.step) == 6, "3 epochs of 2 minibatches"
    assert float(state.params["value"]) > 0, "the value moves toward the positive targets"
    assert set(metrics) >= {"ppo/loss", "ppo/grad_norm", "ppo/entropy", "ppo/approx_kl"}


def test_the_value_clip_binds_below_too():
    """A prediction that falls further than clip_eps below the old one, toward a target below both: the clipped
    prediction (old - clip_eps) is further from the target, so its error is the one taken."""
    settings = dr.PPOSettings(clip_eps=0.2, vf_coef=1.0, ent_coef=0.0, num_epochs=1, num_minibatches=1)
    transitions = transitions_of(
        jnp.zeros((1, 1)), [[0.5]], jnp.zeros((1, 1), bool), log_prob=jnp.full((1, 1), -math.log(3.0))
    )
    params = {"logits": jnp.zeros((1, 1, 3)), "value": jnp.full((1, 1), 0.1)}
    _, metrics = dr.ppo_loss(
        params, FixedOutputs(), None, transitions, jnp.zeros((1, 1)), jnp.full((1, 1), -0.5), settings
    )
    assert float(metrics["ppo/value_loss"]) == pytest.approx(0.5 * (0.3 + 0.5) ** 2)
    expected = reference_loss([[[0.0] * 3]], [[0.1]], [[0]], [[-math.log(3.0)]], [[0.5]], [[0.0]], [[-0.5]], settings)
    assert float(metrics["ppo/loss"]) == pytest.approx(expected, rel=1e-5)


def test_episode_metrics_count_a_time_out_as_unsolved():
    """Three episodes end: one at the goal (reward 0.7), two by the time limit (reward 0); one step ends none."""
    done = jnp.array([[True, False], [True, True]])
    reward = jnp.array([[0.7, 0.0], [0.0, 0.0]])
    metrics = dr.episode_metrics(transitions_of(reward, jnp.zeros((2, 2)), done))
    assert float(metrics["train/solve_rate"]) == pytest.approx(1 / 3)
    assert float(metrics["train/return"]) == pytest.approx(0.7 / 3)
    assert float(metrics["train/episodes"]) == 3


def test_an_annealed_learning_rate_reaches_zero_after_every_gradient_step_of_the_run():
    """3 updates of 2 epochs of 2 minibatches are 12 Adam steps: with a constant gradient each step moves by about
    the learning rate, which falls linearly from lr to 0 over the 12, not over the updates or the epochs alone."""
    config = with_flags(
        dr.Config(), anneal_lr=True, lr=1.0, total_updates=3, log_interval=1, num_epochs=2, num_minibatches=2
    )
    optimizer = dr.make_optimizer(config)
    params = jnp.zeros(1)
    state = optimizer.init(params)
    steps = []
    for _ in range(12):
        updates, state = optimizer.update(jnp.ones(1), state, params)
        steps.append(-float(updates[0]))
    np.testing.assert_allclose(steps, [1 - k / 12 for k in range(12)], rtol=1e-3)


class RecordingOutputs:
    """A stand-in network that records the env indices (its observations) of each minibatch it is applied to."""

    def __init__(self):
        self.minibatches = []

    def apply(self, params, carry, obs, reset):
        jax.debug.callback(lambda envs: self.minibatches.append(sorted(envs.tolist())), obs[0, :, 0], ordered=True)
        return carry, jnp.zeros((*reset.shape, 3)), jnp.full(reset.shape, params["value"])


def test_each_epoch_splits_the_envs_into_minibatches_afresh():
    """2 epochs of 2 minibatches over 8 envs: each epoch's minibatches cover every env once, and the second epoch
    splits them otherwise than the first (a fixed split would be the same minibatches every epoch)."""
    settings = dr.PPOSettings(clip_eps=0.2, vf_coef=1.0, ent_coef=0.0, num_epochs=2, num_minibatches=2)
    envs, network = 8, RecordingOutputs()
    no_end = jnp.zeros((2, envs), bool)
    obs = jnp.broadcast_to(jnp.arange(envs)[None, :, None], (2, envs, 1))  # [T=2, envs, 1]: each env's index
    transitions = transitions_of(jnp.zeros((2, envs)), jnp.zeros((2, envs)), no_end, reset=no_end, obs=obs)
    state = TrainState.create(apply_fn=None, params={"value": jnp.zeros(())}, tx=optax.sgd(0.1))
    targets = jnp.zeros((2, envs))
    jax.block_until_ready(
        dr.ppo_update(jax.random.key(3), state, network, None, transitions, targets, targets, settings)
    )
    epochs = [network.minibatches[:2], network.minibatches[2:]]
    assert len(network.minibatches) == 4 and all(sorted(a + b) == list(range(envs)) for a, b in epochs)
    assert sorted(epochs[0]) != sorted(epochs[1]), epochs
