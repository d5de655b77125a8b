"""Domain Randomization (DR) on AMaze: PPO with a CNN+LSTM student on fresh random mazes every update.

The UED baseline of PAIRED (Dennis et al., 2020) and Robust PLR (Jiang et al., 2021); reference
implementation: minimax-lib 0.2.0 `DRRunner` with the shipped maze config (docs/methods.md).
Every update resets all envs to fresh 60-wall levels, rolls out 256 steps with auto-reset to new random
levels, and takes one PPO update (5 epochs of full-rollout BPTT).

This file is the template the other algos/ scripts copy; their docstrings say "diff against: algos/dr.py".
Deviation from minimax, on purpose: the LSTM carry starts at zero with each update's fresh levels;
`--carry-across-updates` carries the previous rollout's memory into them, as minimax does.

    python algos/dr.py --num-seeds 2 --run-name dr_demo
"""

import sys
from pathlib import Path

# SCAFFOLDING: the repo root on sys.path, so that `python algos/<script>.py` imports envs and common; then Ctrl+C
# while the libraries below load ends the script quietly (common/quiet_start.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common.quiet_start  # noqa: F401, I001 (first: before the libraries load)

import functools
import operator
from dataclasses import dataclass
from typing import Annotated, NamedTuple

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from flax.training.train_state import TrainState
from tyro.conf import OmitArgPrefixes

from common import driver
from common.config import (
    AT_LEAST_ONE,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    Range,
    RunConfig,
    maze_and_ppo_problems,
    raise_first,
    range_problems,
    run_problems,
    unset_means,
)
from common.contract import FINITE_METRIC, BatchedOverSeeds, all_finite, over_seeds
from common.devices import make_placement, scan_unroll
from common.heldout_eval import heldout_evaluator
from envs.levels import sample_dr_level, shortest_path_length, wall_count
from envs.maze import (
    NUM_ACTIONS,
    EnvParams,
    FreshLevelsState,
    Level,
    Observation,
    reset_to_fresh_levels,
    reset_to_level,
    step_and_next_level,
)


@dataclass(frozen=True)
class Environment:
    maze_size: Annotated[int, Range(2, 101)] = 13
    """Interior height and width of training mazes."""
    n_walls: Annotated[int, NON_NEGATIVE] = 60
    """Wall cells drawn with replacement per training level."""
    max_steps: Annotated[int, AT_LEAST_ONE] = 250
    """Episode length limit on training levels."""
    agent_view_size: Annotated[int, Range(3)] = 5
    """Side of the agent's egocentric view (odd)."""


class PPOSettings(NamedTuple):
    """The hyperparameters of one PPO update (`ppo_loss`, `ppo_update`)."""

    clip_eps: float
    vf_coef: float
    ent_coef: float
    num_epochs: int
    num_minibatches: int


@dataclass(frozen=True)
class PPO:
    num_envs: Annotated[int, AT_LEAST_ONE] = 32
    """Parallel envs per seed."""
    num_steps: Annotated[int, AT_LEAST_ONE] = 256
    """Rollout length per update; PPO back-propagates through all of it."""
    lr: Annotated[float, POSITIVE] = 1e-4
    """Adam learning rate."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 over --total-student-updates, else --total-updates (minimax: off)."""
    adam_eps: Annotated[float, POSITIVE] = 1e-5
    """Adam epsilon."""
    gamma: Annotated[float, FRACTION] = 0.995
    """Discount."""
    gae_lambda: Annotated[float, FRACTION] = 0.98
    """GAE lambda."""
    num_epochs: Annotated[int, AT_LEAST_ONE] = 5
    """PPO epochs per update."""
    num_minibatches: Annotated[int, AT_LEAST_ONE] = 1
    """Minibatches per epoch, split along envs (1: the whole rollout is one minibatch)."""
    clip_eps: Annotated[float, POSITIVE] = 0.2
    """PPO clip range for the ratio and the value."""
    ent_coef: Annotated[float, NON_NEGATIVE] = 1e-3
    """Entropy bonus coefficient."""
    vf_coef: Annotated[float, NON_NEGATIVE] = 0.5
    """Value loss coefficient."""
    max_grad_norm: Annotated[float, POSITIVE] = 0.5
    """Global gradient norm clip."""
    lstm_size: Annotated[int, AT_LEAST_ONE] = 256
    """LSTM units of the student."""

    @property
    def settings(self) -> PPOSettings:
        return PPOSettings(self.clip_eps, self.vf_coef, self.ent_coef, self.num_epochs, self.num_minibatches)


@dataclass(frozen=True)
class Config:
    carry_across_updates: bool = False
    """Start each update's fresh levels with the LSTM carry the last rollout ended with (minimax); off: zero."""
    levels_per_env: Annotated[int | None, AT_LEAST_ONE, unset_means("--num-steps / 4")] = None
    """Fresh levels made per env and update, one for each episode it starts (an env needing more reuses them)."""
    env: Annotated[Environment, OmitArgPrefixes] = Environment()
    """Environment: AMaze training levels."""
    ppo: Annotated[PPO, OmitArgPrefixes] = PPO()
    """PPO and the student network (docs/methods.md, DR column)."""
    run: Annotated[RunConfig, OmitArgPrefixes] = RunConfig(run_name="dr", screenshot_interval=1000)
    """Run: seeds, length (minimax's budget: 30,000 updates, one PPO step each), folder, logging and evaluation."""

    def __post_init__(self):
        raise_first(range_problems(self))
        env, ppo = self.env, self.ppo
        raise_first(
            [
                *run_problems(self.run, ppo.num_envs),
                *maze_and_ppo_problems(env, ppo),
            ]
        )

    @property
    def schedule_spans_run(self) -> bool:
        """The learning rate anneals over the run: a resume keeps its length."""
        return self.ppo.anneal_lr

    @property
    def env_steps_per_update(self) -> int:
        return self.ppo.num_envs * self.ppo.num_steps

    @property
    def env_params(self) -> EnvParams:
        return EnvParams(max_steps=self.env.max_steps, agent_view_size=self.env.agent_view_size)

    @property
    def fresh_levels(self) -> int:
        """Levels made per env and update: enough unless its episodes average under 4 steps."""
        return self.levels_per_env or -(-self.ppo.num_steps // 4)


HEADLINE_METRICS = ("train/return",)
"""Metrics shown on the progress line (with the evaluation solve rates)."""


class Conv3x3(nn.Module):
    """nn.Conv(features, (3, 3), padding="VALID") written as one matmul over each cell's 3x3 patch: the
    same function, parameters and initial values. XLA:CPU runs a convolution's weight gradient inside a
    loop (the PPO epochs) 20-100x slower than outside (jaxlib 0.10.2); as a matmul it stays fast."""

    features: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:  # [..., H, W, C] -> [..., H - 2, W - 2, features]
        kernel = self.param("kernel", nn.initializers.orthogonal(np.sqrt(2)), (3, 3, x.shape[-1], self.features))
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        height, width = x.shape[-3] - 2, x.shape[-2] - 2
        patches = [x[..., row : row + height, col : col + width, :] for row in range(3) for col in range(3)]
        return jnp.concatenate(patches, -1) @ kernel.reshape(-1, self.features) + bias


class LSTMStep(nn.Module):
    """One LSTM step whose carry is zeroed where the previous step ended an episode. Input and recurrent kernels
    start orthogonal, as minimax's (`models/common.py:ScannedRNN`)."""

    @nn.compact
    def __call__(self, carry, inputs):
        features, reset = inputs
        carry = jax.tree.map(lambda c: jnp.where(reset[:, None], 0.0, c), carry)
        orthogonal = nn.initializers.orthogonal()
        cell = nn.OptimizedLSTMCell(carry[0].shape[-1], kernel_init=orthogonal, recurrent_kernel_init=orthogonal)
        return cell(carry, features)


def scanned_lstm(unroll: int) -> nn.Module:
    """`LSTMStep` over the time axis, `unroll` steps per loop iteration. Named as the parameters of earlier
    checkpoints are (`ScannedLSTM_0`)."""
    scan = nn.scan(
        LSTMStep, variable_broadcast="params", in_axes=0, out_axes=0, split_rngs={"params": False}, unroll=unroll
    )
    return scan(name="ScannedLSTM_0")


class ActorCritic(nn.Module):
    """The student (docs/methods.md): 3x3 conv (16) on the view + direction embedding (4 -> 5) -> LSTM -> policy and
    value heads Dense(32)+tanh. About 433k parameters at lstm_size 256."""

    num_actions: int = NUM_ACTIONS
    unroll: int = 1  # time steps per iteration of the LSTM's scan (--unroll)

    @nn.compact
    def __call__(self, carry, obs: Observation, reset: jax.Array):  # obs leaves [T, B, ...], reset [T, B]
        image = Conv3x3(16)(obs.image)
        image = nn.relu(image).reshape(*image.shape[:-3], -1)  # [T, B, 144]
        direction = nn.Embed(4, 5, embedding_init=nn.initializers.orthogonal())(obs.agent_dir)  # [T, B, 5]
        carry, hidden = scanned_lstm(self.unroll)(carry, (jnp.concatenate([image, direction], -1), reset))

        def head(outputs: int, last_init):
            layer = nn.Dense(32, kernel_init=nn.initializers.orthogonal(np.sqrt(2)))(hidden)
            return nn.Dense(outputs, kernel_init=last_init)(nn.tanh(layer))

        # Initialisers as minimax's `GridWorldBasicModel`: the constant last policy layer makes the first
        # policy uniform.
        policy = head(self.num_actions, nn.initializers.constant(0.01))
        return carry, policy, head(1, nn.initializers.orthogonal(1.0))[..., 0]


def initial_carry(batch_size: int, lstm_size: int) -> tuple[jax.Array, jax.Array]:
    return jnp.zeros((batch_size, lstm_size)), jnp.zeros((batch_size, lstm_size))


class Transition(NamedTuple):  # leaves [num_steps, num_envs, ...]
    obs: Observation
    reset: jax.Array  # the previous step ended an episode: the LSTM carry is zeroed before this step
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    reward: jax.Array
    done: jax.Array


@struct.dataclass
class RunnerState:
    train_state: TrainState
    rng: jax.Array
    rng_eval: jax.Array  # fixed per seed; evaluation keys are folded with the update so training never depends on them
    update: jax.Array  # int32[], PPO updates done
    student_updates: jax.Array  # int32[], student PPO updates done (what the papers budget)
    carry: tuple[jax.Array, jax.Array] | None = None  # the last rollout's final LSTM carry, with --carry-across-updates


class RolloutState(NamedTuple):  # leaves [num_envs, ...]
    obs: Observation
    env_state: object
    carry: tuple[jax.Array, jax.Array]
    reset: jax.Array  # the last step ended an episode


def add_time_axis(tree):
    return jax.tree.map(lambda x: x[None], tree)


def rollout(rng, network, params, start: RolloutState, step_env, num_steps, unroll) -> tuple[Transition, RolloutState]:
    """`num_steps` policy steps in every env, `unroll` per loop iteration; returns the transitions and the state
    after the last step."""

    def one_step(state: RolloutState, rng_step):
        obs, env_state, carry, reset = state
        rng_action, rng_env = jax.random.split(rng_step)
        next_carry, logits, value = network.apply(params, carry, add_time_axis(obs), reset[None])
        logits, value = logits[0], value[0]
        policy = distrax.Categorical(logits=logits)
        action = policy.sample(seed=rng_action)
        log_prob = policy.log_prob(action)
        rng_envs = jax.random.split(rng_env, action.shape[0])
        next_obs, env_state, reward, done, _ = step_env(rng_envs, env_state, action)
        transition = Transition(obs, reset, action, log_prob, value, reward, done)
        return RolloutState(next_obs, env_state, next_carry, done), transition

    end, transitions = jax.lax.scan(one_step, start, jax.random.split(rng, num_steps), unroll=unroll)
    return transitions, end


def compute_gae(transitions: Transition, last_value: jax.Array, gamma: float, gae_lambda: float):
    """GAE(gamma, lambda) by a reverse scan; episode ends (goal or time limit) are terminal, as in minimax.
    Returns (advantages, value targets), each [num_steps, num_envs]."""

    def backward(carry, transition):
        gae, next_value = carry
        not_done = 1.0 - transition.done
        delta = transition.reward + gamma * next_value * not_done - transition.value
        gae = delta + gamma * gae_lambda * not_done * gae
        return (gae, transition.value), gae

    _, advantages = jax.lax.scan(backward, (jnp.zeros_like(last_value), last_value), transitions, reverse=True)
    return advantages, advantages + transitions.value


def ppo_loss(params, network, carry, transitions: Transition, advantages, targets, settings: PPOSettings):
    """The clipped PPO objective on one minibatch: (loss, metrics). Advantages are normalised over the minibatch;
    the value loss is clipped like the ratio (all as in minimax's `agents/ppo.py`)."""
    _, logits, value = network.apply(params, carry, transitions.obs, transitions.reset)
    policy = distrax.Categorical(logits=logits)
    log_prob = policy.log_prob(transitions.action)
    entropy = policy.entropy().mean()
    log_ratio = log_prob - transitions.log_prob
    ratio = jnp.exp(log_ratio)
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-5)  # minimax's epsilon
    clipped_ratio = jnp.clip(ratio, 1.0 - settings.clip_eps, 1.0 + settings.clip_eps)
    policy_loss = -jnp.minimum(ratio * advantages, clipped_ratio * advantages).mean()
    clipped_value = transitions.value + jnp.clip(value - transitions.value, -settings.clip_eps, settings.clip_eps)
    value_loss = 0.5 * jnp.maximum((value - targets) ** 2, (clipped_value - targets) ** 2).mean()
    loss = policy_loss + settings.vf_coef * value_loss - settings.ent_coef * entropy
    metrics = {
        "ppo/loss": loss,
        "ppo/policy_loss": policy_loss,
        "ppo/value_loss": value_loss,
        "ppo/entropy": entropy,
        "ppo/approx_kl": ((ratio - 1.0) - log_ratio).mean(),
        "ppo/clip_frac": (jnp.abs(ratio - 1.0) > settings.clip_eps).mean(),
        # minimax's mean_value and mean_target: what the value head predicts and the targets it fits
        "ppo/mean_value": value.mean(),
        "ppo/mean_target": targets.mean(),
    }
    return loss, metrics


def ppo_update(
    rng, train_state: TrainState, network, carry, transitions: Transition, advantages, targets, settings: PPOSettings
):
    """`num_epochs` epochs of `num_minibatches` minibatches split along envs, each back-propagating through
    the whole rollout from its initial LSTM carry. Returns (train_state, metrics averaged over minibatches)."""
    num_envs = transitions.reward.shape[1]

    def epoch(train_state, rng_epoch):
        order = jax.random.permutation(rng_epoch, num_envs).reshape(settings.num_minibatches, -1)  # [M, B/M]
        batches = (
            jax.tree.map(lambda x: x[order], carry),  # [M, B/M, H]
            jax.tree.map(lambda x: jnp.moveaxis(x[:, order], 1, 0), (transitions, advantages, targets)),  # [M, T, B/M]
        )

        def minibatch(train_state, batch):
            batch_carry, (batch_transitions, batch_advantages, batch_targets) = batch
            grads, metrics = jax.grad(ppo_loss, has_aux=True)(
                train_state.params, network, batch_carry, batch_transitions, batch_advantages, batch_targets, settings
            )
            metrics["ppo/grad_norm"] = optax.tree.norm(grads)
            return train_state.apply_gradients(grads=grads), metrics

        return jax.lax.scan(minibatch, train_state, batches)

    train_state, metrics = jax.lax.scan(epoch, train_state, jax.random.split(rng, settings.num_epochs))
    return train_state, jax.tree.map(jnp.mean, metrics)


def episode_metrics(transitions: Transition) -> dict:
    """Mean return and solve rate over episodes that ended in this rollout. AMaze pays reward only on the
    step that reaches the goal, so an episode's return is the reward of its last step."""
    finished = transitions.done.sum()
    episode_return = jnp.where(transitions.done, transitions.reward, 0.0).sum() / finished
    solved = (transitions.done & (transitions.reward > 0)).sum() / finished
    return {"train/return": episode_return, "train/solve_rate": solved, "train/episodes": finished.astype(jnp.float32)}


def reused_levels(end_states: FreshLevelsState, last_done: jax.Array) -> dict:
    """Episodes played (for at least one step) on a level the env had already played this rollout, having used up
    its fresh ones: summed over envs. An episode started by the rollout's last step (`last_done` [num_envs]) is
    played in no step of it and does not count."""
    levels_per_env = end_states.levels.wall_map.shape[1]
    played = end_states.started - last_done
    reused = jnp.maximum(played - levels_per_env, 0).sum()
    return {"train/reused_levels": reused.astype(jnp.float32)}


def level_metrics(levels: Level, prefix: str) -> dict:
    """Walls, solvable fraction and mean shortest path (over solvable levels) of a batch of levels."""
    lengths = jax.vmap(shortest_path_length)(levels)
    solvable = lengths >= 0
    return {
        f"{prefix}/walls": jax.vmap(wall_count)(levels).mean(dtype=jnp.float32),
        f"{prefix}/solvable": solvable.mean(dtype=jnp.float32),
        f"{prefix}/shortest_path": jnp.where(solvable, lengths, 0).sum() / solvable.sum(),
    }


def make_optimizer(config: Config):
    ppo, run = config.ppo, config.run
    # The schedule spans the student updates of the run: optax counts only applied gradient steps.
    steps = (run.total_student_updates or run.total_updates) * ppo.num_epochs * ppo.num_minibatches
    learning_rate = optax.linear_schedule(ppo.lr, 0.0, steps) if ppo.anneal_lr else ppo.lr
    return optax.chain(optax.clip_by_global_norm(ppo.max_grad_norm), optax.adam(learning_rate, eps=ppo.adam_eps))


def make_train(config: Config) -> BatchedOverSeeds:
    env, ppo, run = config.env, config.ppo, config.run
    env_params = config.env_params
    unroll = scan_unroll(run.devices)
    network = ActorCritic(unroll=unroll)
    sample_level = functools.partial(sample_dr_level, height=env.maze_size, width=env.maze_size, n_walls=env.n_walls)
    step_env = jax.vmap(functools.partial(step_and_next_level, params=env_params))
    reset_env = jax.vmap(reset_to_level, (None, 0, None))
    start_envs = jax.vmap(reset_to_fresh_levels, (None, 0, None))
    placement = make_placement(run, ppo.num_envs)
    student_params = operator.attrgetter("train_state.params")

    def init(rng) -> RunnerState:
        rng, rng_params, rng_eval = jax.random.split(rng, 3)
        dummy_obs, _ = reset_env(rng, jax.vmap(sample_level)(jax.random.split(rng, 1)), env_params)
        params = network.init(
            rng_params, initial_carry(1, ppo.lstm_size), add_time_axis(dummy_obs), jnp.zeros((1, 1), bool)
        )
        train_state = TrainState.create(apply_fn=network.apply, params=params, tx=make_optimizer(config))
        carry = initial_carry(ppo.num_envs, ppo.lstm_size) if config.carry_across_updates else None
        return RunnerState(
            train_state=train_state,
            rng=rng,
            rng_eval=rng_eval,
            update=jnp.int32(0),
            student_updates=jnp.int32(0),
            carry=carry,
        )

    def update(runner: RunnerState, _):
        rng, rng_levels, rng_rollout, rng_ppo = jax.random.split(runner.rng, 4)
        params = runner.train_state.params
        # CURRICULUM: DR has no teacher; every episode of the update plays a fresh random level, made up front.
        level_keys = jax.random.split(rng_levels, (ppo.num_envs, config.fresh_levels))
        fresh_levels = jax.vmap(jax.vmap(sample_level))(level_keys)
        obs, env_state = start_envs(rng_levels, fresh_levels, env_params)
        levels = jax.tree.map(lambda x: x[:, 0], fresh_levels)
        carry = runner.carry if config.carry_across_updates else initial_carry(ppo.num_envs, ppo.lstm_size)
        # ROLLOUT
        reset = jnp.full(ppo.num_envs, not config.carry_across_updates)
        start = placement.split_envs(RolloutState(obs, env_state, carry, reset=reset))
        transitions, end = rollout(rng_rollout, network, params, start, step_env, ppo.num_steps, unroll)
        # ADVANTAGES
        _, _, last_value = network.apply(params, end.carry, add_time_axis(end.obs), end.reset[None])
        advantages, targets = compute_gae(transitions, last_value[0], ppo.gamma, ppo.gae_lambda)
        # PPO UPDATE
        train_state, ppo_metrics = ppo_update(
            rng_ppo, runner.train_state, network, carry, transitions, advantages, targets, ppo.settings
        )
        finite = all_finite((ppo_metrics["ppo/loss"], train_state.params, train_state.opt_state))
        metrics = {
            **episode_metrics(transitions),
            **reused_levels(end.env_state, transitions.done[-1]),
            **ppo_metrics,
            FINITE_METRIC: finite,
        }
        runner = runner.replace(
            train_state=train_state, rng=rng, update=runner.update + 1, student_updates=runner.student_updates + 1
        )
        if config.carry_across_updates:
            runner = runner.replace(carry=end.carry)
        return runner, (metrics, levels)

    def step_chunk(runner: RunnerState):
        runner, (metrics, levels) = jax.lax.scan(update, runner, None, run.log_interval)
        # LOGGING ONLY: the levels' shortest paths, one batched search for the chunk's updates rather than one each.
        return runner, {**metrics, **jax.vmap(lambda played: level_metrics(played, "level"))(levels)}

    # EVAL
    eval_carry = initial_carry(run.eval_episodes, ppo.lstm_size)
    evaluate_runner = heldout_evaluator(network.apply, student_params, eval_carry, run, env_params)

    def training_levels(runner: RunnerState) -> tuple[Level, dict]:
        """Fresh DR levels, as the next update would draw them (no labels)."""
        rng = jax.random.fold_in(runner.rng_eval, -1 - runner.update)
        return jax.vmap(sample_level)(jax.random.split(rng, ppo.num_envs)), {}

    return over_seeds(
        config,
        placement,
        init=init,
        step=step_chunk,
        evaluate=evaluate_runner,
        levels=training_levels,
        policies={"student": student_params},
    )


if __name__ == "__main__":
    driver.main(Config, make_train, __doc__, __file__, HEADLINE_METRICS)
