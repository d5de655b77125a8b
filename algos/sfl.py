"""Sampling For Learnability (SFL) on AMaze: train on the random levels the student solves about half the time.

Rutherford et al., 2024, "No Regrets: Investigating and Improving Regret Approximations for Curriculum
Discovery" (NeurIPS); reference: the authors' maze code (amacrutherford/sampling-for-learnability,
`sfl/train/minigrid_sfl.py`, `config/minigrid-sfl.yaml`). Every `--refresh-interval` updates (the first at
update 0) the current policy scores `--score-batches` x `--score-batch-size` fresh DR levels: each level is
played for `--score-steps` steps with sampled actions, restarting on the same level after every episode (the
LSTM carry zeroed), and p is its success rate over the first `--counted-episodes` completed episodes (a
time-out fails). Learnability is p(1 - p); the `--buffer-size` most learnable levels become the buffer,
rebuilt from scratch each refresh. Every update then resets all envs: a `--buffer-fraction` of them on levels
drawn uniformly (with replacement) from the buffer, the rest on fresh DR levels, and takes one PPO update on
the whole batch.

Cost: scoring at the defaults plays 25,000 levels x 2,000 steps = 5.0e7 env steps per refresh, about 7.6x the
6.6e6 that 100 training updates of 256 envs x 256 steps take. It keeps only per-level counters in its scan
carry (no trajectories), so its memory does not grow with --score-steps. The refresh is a lax.cond on the
update count, which every seed shares, taken outside the vmap over seeds: chunks without a refresh skip it.
Diff against: algos/dr.py.

    python algos/sfl.py --num-seeds 2 --run-name sfl_demo
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

from common import driver, ued_scores
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
)
from common.contract import FINITE_METRIC, BatchedOverSeeds, all_finite, over_seeds
from common.devices import make_placement, scan_unroll, vmap_seeds
from common.heldout_eval import heldout_evaluator
from envs.levels import sample_dr_level, shortest_path_length, wall_count
from envs.maze import NUM_ACTIONS, EnvParams, Level, Observation, reset_to_level, step_and_restart


# copied from algos/dr.py:Environment
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


# copied from algos/dr.py:PPOSettings
class PPOSettings(NamedTuple):
    """The hyperparameters of one PPO update (`ppo_loss`, `ppo_update`)."""

    clip_eps: float
    vf_coef: float
    ent_coef: float
    num_epochs: int
    num_minibatches: int


@dataclass(frozen=True)
class PPO:
    num_envs: Annotated[int, AT_LEAST_ONE] = 256
    """Parallel envs per seed (SFL: NUM_ENVS 256; our other scripts: 32)."""
    num_steps: Annotated[int, AT_LEAST_ONE] = 256
    """Rollout length per update; PPO back-propagates through all of it (SFL: NUM_STEPS 256)."""
    lr: Annotated[float, POSITIVE] = 2.5e-4
    """Adam learning rate (SFL: LR 2.5e-4)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over --total-student-updates, else --total-updates (SFL: on)."""
    adam_eps: Annotated[float, POSITIVE] = 1e-5
    """Adam epsilon (SFL: 1e-5)."""
    gamma: Annotated[float, FRACTION] = 0.99
    """Discount (SFL: GAMMA 0.99; our other scripts: 0.995-0.999)."""
    gae_lambda: Annotated[float, FRACTION] = 0.95
    """GAE lambda (SFL: GAE_LAMBDA 0.95)."""
    num_epochs: Annotated[int, AT_LEAST_ONE] = 4
    """PPO epochs per update (SFL: UPDATE_EPOCHS 4)."""
    num_minibatches: Annotated[int, AT_LEAST_ONE] = 4
    """Minibatches per epoch, split along envs (SFL: NUM_MINIBATCHES 4; our other scripts: 1)."""
    clip_eps: Annotated[float, POSITIVE] = 0.04
    """PPO clip range for the ratio and the value (SFL: CLIP_EPS 0.04; our other scripts: 0.2)."""
    ent_coef: Annotated[float, NON_NEGATIVE] = 0.0
    """Entropy bonus coefficient (SFL: ENT_COEF 0)."""
    vf_coef: Annotated[float, NON_NEGATIVE] = 0.5
    """Value loss coefficient (SFL: VF_COEF 0.5)."""
    max_grad_norm: Annotated[float, POSITIVE] = 0.5
    """Global gradient norm clip (SFL: MAX_GRAD_NORM 0.5)."""
    lstm_size: Annotated[int, AT_LEAST_ONE] = 256
    """LSTM units of the student (our student network throughout; SFL's maze network also has 256)."""

    @property
    def settings(self) -> PPOSettings:
        return PPOSettings(self.clip_eps, self.vf_coef, self.ent_coef, self.num_epochs, self.num_minibatches)


@dataclass(frozen=True)
class Config:
    refresh_interval: Annotated[int, AT_LEAST_ONE] = 100
    """Updates between refreshes of the buffer; a multiple of --log-interval (SFL: EVAL_FREQ 100)."""
    score_batches: Annotated[int, AT_LEAST_ONE] = 5
    """Batches of fresh levels scored per refresh (SFL: NUM_BATCHES 5)."""
    score_batch_size: Annotated[int, AT_LEAST_ONE] = 5000
    """Levels per scoring batch, played at once (SFL: BATCH_SIZE 5000)."""
    score_steps: Annotated[int, AT_LEAST_ONE] = 2000
    """Steps each scored level is played, restarting after every episode (SFL: ROLLOUT_STEPS 2000)."""
    counted_episodes: Annotated[int, AT_LEAST_ONE] = 10
    """Completed episodes of a scored level that count toward its success rate p (SFL: the first 10)."""
    buffer_size: Annotated[int, AT_LEAST_ONE] = 1000
    """Most learnable levels kept as the buffer at each refresh (SFL: NUM_TO_SAVE 1000)."""
    buffer_fraction: Annotated[float, FRACTION] = 0.5
    """Fraction of each update's envs on buffer levels; the rest get fresh DR levels (SFL: 128 of 256)."""
    env: Annotated[Environment, OmitArgPrefixes] = Environment()
    """Environment: AMaze training levels (SFL: 13x13, 60 walls, 250 steps)."""
    ppo: Annotated[PPO, OmitArgPrefixes] = PPO()
    """PPO and the student network (SFL's maze configuration; docs/methods.md#sfl)."""
    run: Annotated[RunConfig, OmitArgPrefixes] = RunConfig(run_name="sfl", total_updates=4580, screenshot_interval=100)
    """Run: seeds, length, folder, logging and evaluation (SFL: 3e8 env steps = 4,580 updates of 256 x 256)."""

    def __post_init__(self):
        raise_first(range_problems(self))
        env, ppo = self.env, self.ppo
        raise_first(
            [
                *run_problems(self.run, ppo.num_envs),
                *maze_and_ppo_problems(env, ppo),
                (
                    self.refresh_interval % self.run.log_interval != 0,
                    f"--refresh-interval ({self.refresh_interval}) must be a multiple of --log-interval "
                    f"({self.run.log_interval}): refreshes happen between chunks",
                ),
                (
                    self.score_steps < env.max_steps,
                    f"--score-steps ({self.score_steps}) must be at least --max-steps ({env.max_steps}), so every "
                    "scored level finishes an episode",
                ),
                (
                    self.buffer_size > self.score_batches * self.score_batch_size,
                    f"--buffer-size ({self.buffer_size}) must not exceed the levels scored per refresh "
                    f"(--score-batches x --score-batch-size = {self.score_batches * self.score_batch_size})",
                ),
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
    def buffer_envs(self) -> int:
        """Envs per update on buffer levels."""
        return round(self.buffer_fraction * self.ppo.num_envs)


HEADLINE_METRICS = ("train/return", "train_fresh/return", "sfl/buffer_learnability")
"""Metrics shown on the progress line (with the evaluation solve rates)."""


# copied from algos/dr.py:Conv3x3
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


# copied from algos/dr.py:LSTMStep
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


# copied from algos/dr.py:scanned_lstm
def scanned_lstm(unroll: int) -> nn.Module:
    """`LSTMStep` over the time axis, `unroll` steps per loop iteration. Named as the parameters of earlier
    checkpoints are (`ScannedLSTM_0`)."""
    scan = nn.scan(
        LSTMStep, variable_broadcast="params", in_axes=0, out_axes=0, split_rngs={"params": False}, unroll=unroll
    )
    return scan(name="ScannedLSTM_0")


# copied from algos/dr.py:ActorCritic
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


# copied from algos/dr.py:initial_carry
def initial_carry(batch_size: int, lstm_size: int) -> tuple[jax.Array, jax.Array]:
    return jnp.zeros((batch_size, lstm_size)), jnp.zeros((batch_size, lstm_size))


# copied from algos/dr.py:Transition
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
    buffer: Level  # [buffer_size], the most learnable levels of the last refresh
    learnability: jax.Array  # float32[buffer_size], their p (1 - p)
    success: jax.Array  # float32[buffer_size], their p
    refreshed_at: jax.Array  # int32[], the update at which the last refresh rebuilt the buffer
    learnable_fraction: jax.Array  # float32[], of the levels the last refresh scored, the share with 0 < p < 1
    scored_success: jax.Array  # float32[], their mean p
    rng: jax.Array
    rng_eval: jax.Array  # fixed per seed; evaluation keys are folded with the update so training never depends on them
    update: jax.Array  # int32[], PPO updates done
    student_updates: jax.Array  # int32[], student PPO updates done (what the papers budget)


class ScoringState(NamedTuple):  # leaves [score_batch_size, ...]: counters only, so memory does not grow with steps
    obs: Observation
    env_state: object
    carry: tuple[jax.Array, jax.Array]
    reset: jax.Array  # the last step ended an episode
    completed: jax.Array  # int32: episodes completed so far
    successes: jax.Array  # int32: successes among the first counted_episodes completed


# copied from algos/dr.py:RolloutState
class RolloutState(NamedTuple):  # leaves [num_envs, ...]
    obs: Observation
    env_state: object
    carry: tuple[jax.Array, jax.Array]
    reset: jax.Array  # the last step ended an episode


# copied from algos/dr.py:add_time_axis
def add_time_axis(tree):
    return jax.tree.map(lambda x: x[None], tree)


# copied from algos/dr.py:rollout
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


# copied from algos/dr.py:compute_gae
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


# copied from algos/dr.py:ppo_loss
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


# copied from algos/dr.py:ppo_update
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


# copied from algos/dr.py:episode_metrics
def episode_metrics(transitions: Transition) -> dict:
    """Mean return and solve rate over episodes that ended in this rollout. AMaze pays reward only on the
    step that reaches the goal, so an episode's return is the reward of its last step."""
    finished = transitions.done.sum()
    episode_return = jnp.where(transitions.done, transitions.reward, 0.0).sum() / finished
    solved = (transitions.done & (transitions.reward > 0)).sum() / finished
    return {"train/return": episode_return, "train/solve_rate": solved, "train/episodes": finished.astype(jnp.float32)}


# copied from algos/dr.py:level_metrics
def level_metrics(levels: Level, prefix: str) -> dict:
    """Walls, solvable fraction and mean shortest path (over solvable levels) of a batch of levels."""
    lengths = jax.vmap(shortest_path_length)(levels)
    solvable = lengths >= 0
    return {
        f"{prefix}/walls": jax.vmap(wall_count)(levels).mean(dtype=jnp.float32),
        f"{prefix}/solvable": solvable.mean(dtype=jnp.float32),
        f"{prefix}/shortest_path": jnp.where(solvable, lengths, 0).sum() / solvable.sum(),
    }


def tally(completed, successes, done, reward, counted: int):
    """Add one step's outcomes to a level's counters: an episode that ends (done) is completed, and a success
    (goal reached: reward > 0; a time-out fails) when it is among the first `counted`."""
    counts = done & (completed < counted)
    return completed + done, successes + (counts & (reward > 0))


def learnability(completed: jax.Array, successes: jax.Array, counted: int) -> tuple[jax.Array, jax.Array]:
    """(p (1 - p), p) per level from its completed episodes and successes among the first `counted` of them. A
    level that completed no episode would have p = 0 (learnability 0, never kept) where the authors' code divides
    by zero (NaN, which their argsort ranks first); it cannot occur, since --score-steps is at least --max-steps.
    p (1 - p) comes from the success and failure counts (`common.ued_scores.learnability`): mirrored rates tie."""
    counted_episodes = jnp.minimum(completed, counted)
    return (
        ued_scores.learnability(successes, counted_episodes - successes),
        successes / jnp.maximum(counted_episodes, 1),
    )


def score_levels(
    rng, network, params, levels: Level, env_params: EnvParams, num_steps: int, counted: int, lstm: int, unroll: int
):
    """(learnability, p) of each level (leading axis B): `num_steps` sampled-action steps (`unroll` per loop
    iteration), the level restarted after every episode with a zeroed carry, counting successes among the first
    `counted` completed episodes. Only counters live in the scan carry; nothing is stacked over steps."""
    num_levels = levels.wall_map.shape[0]
    rng_reset, rng_steps = jax.random.split(rng)
    obs, env_state = jax.vmap(reset_to_level, (None, 0, None))(rng_reset, levels, env_params)
    step_env = jax.vmap(functools.partial(step_and_restart, params=env_params))

    def one_step(state: ScoringState, rng_step):
        rng_action, rng_env = jax.random.split(rng_step)
        carry, logits, _ = network.apply(params, state.carry, add_time_axis(state.obs), state.reset[None])
        action = distrax.Categorical(logits=logits[0]).sample(seed=rng_action)
        obs, env_state, reward, done, _ = step_env(jax.random.split(rng_env, num_levels), state.env_state, action)
        completed, successes = tally(state.completed, state.successes, done, reward, counted)
        return ScoringState(obs, env_state, carry, done, completed, successes), None

    zeros = jnp.zeros(num_levels, jnp.int32)
    start = ScoringState(obs, env_state, initial_carry(num_levels, lstm), jnp.ones(num_levels, bool), zeros, zeros)
    end, _ = jax.lax.scan(one_step, start, jax.random.split(rng_steps, num_steps), unroll=unroll)
    return learnability(end.completed, end.successes, counted)


def most_learnable(scores: jax.Array, success: jax.Array, levels: Level, count: int):
    """The `count` levels of highest learnability, highest first: (levels, their learnability, their p)."""
    top = jax.lax.top_k(scores, count)[1]
    return jax.tree.map(lambda x: x[top], levels), scores[top], success[top]


def mixed_levels(rng, sample_level, buffer: Level, num_fresh: int, num_buffer: int) -> Level:
    """An update's levels: `num_fresh` fresh DR levels, then `num_buffer` drawn uniformly (with replacement) from
    the buffer."""
    rng_fresh, rng_pick = jax.random.split(rng)
    fresh = jax.vmap(sample_level)(jax.random.split(rng_fresh, num_fresh))
    picks = jax.random.randint(rng_pick, (num_buffer,), 0, buffer.wall_map.shape[0])
    return jax.tree.map(lambda a, b: jnp.concatenate([a, b[picks]]), fresh, buffer)


# copied from algos/dr.py:make_optimizer
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
    step_env = jax.vmap(functools.partial(step_and_restart, params=env_params))
    reset_env = jax.vmap(reset_to_level, (None, 0, None))
    placement = make_placement(run, ppo.num_envs)
    student_params = operator.attrgetter("train_state.params")
    buffer_envs, fresh_envs = config.buffer_envs, ppo.num_envs - config.buffer_envs

    def init(rng) -> RunnerState:
        rng, rng_params, rng_eval = jax.random.split(rng, 3)
        dummy_level = jax.vmap(sample_level)(jax.random.split(rng, 1))
        dummy_obs, _ = reset_env(rng, dummy_level, env_params)
        params = network.init(
            rng_params, initial_carry(1, ppo.lstm_size), add_time_axis(dummy_obs), jnp.zeros((1, 1), bool)
        )
        train_state = TrainState.create(apply_fn=network.apply, params=params, tx=make_optimizer(config))
        buffer = jax.tree.map(lambda x: jnp.repeat(x, config.buffer_size, axis=0), dummy_level)
        zeros = jnp.zeros(config.buffer_size)
        return RunnerState(
            train_state=train_state,
            buffer=buffer,
            learnability=zeros,
            success=zeros,
            refreshed_at=jnp.int32(0),
            learnable_fraction=jnp.float32(0),
            scored_success=jnp.float32(0),
            rng=rng,
            rng_eval=rng_eval,
            update=jnp.int32(0),
            student_updates=jnp.int32(0),
        )

    def refresh(runner: RunnerState) -> RunnerState:
        # CURRICULUM: score fresh DR levels with the current policy and keep the most learnable as the buffer.
        rng, rng_score = jax.random.split(runner.rng)
        score = functools.partial(
            score_levels,
            network=network,
            params=runner.train_state.params,
            env_params=env_params,
            num_steps=config.score_steps,
            counted=config.counted_episodes,
            lstm=ppo.lstm_size,
            unroll=unroll,
        )

        def score_batch(_, rng_batch):
            rng_levels, rng_play = jax.random.split(rng_batch)
            levels = jax.vmap(sample_level)(jax.random.split(rng_levels, config.score_batch_size))
            return None, (*score(rng_play, levels=levels), levels)

        _, scored = jax.lax.scan(score_batch, None, jax.random.split(rng_score, config.score_batches))
        scores, success, levels = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), scored)
        buffer, buffer_scores, buffer_success = most_learnable(scores, success, levels, config.buffer_size)
        return runner.replace(
            buffer=buffer,
            learnability=buffer_scores,
            success=buffer_success,
            refreshed_at=runner.update,
            learnable_fraction=((success > 0) & (success < 1)).mean(dtype=jnp.float32),
            scored_success=success.mean(),
            rng=rng,
        )

    def refresh_seeds(runner: RunnerState) -> RunnerState:
        """A refresh of every seed when this chunk starts a refresh period. Seeds move in lockstep, so seed 0's
        update count decides for all, outside the vmap: a chunk without a refresh really skips it. Chunks start
        on multiples of --log-interval, which divides --refresh-interval, and the driver refuses a resume off
        that grid, so no refresh is ever skipped."""
        refresh_due = runner.update[0] % config.refresh_interval == 0
        return jax.lax.cond(refresh_due, vmap_seeds(refresh), lambda runner: runner, runner)

    def update(runner: RunnerState, _):
        rng, rng_levels, rng_reset, rng_rollout, rng_ppo = jax.random.split(runner.rng, 5)
        params = runner.train_state.params
        # CURRICULUM: a buffer_fraction of the envs replays buffer levels drawn uniformly, the rest play fresh ones.
        levels = mixed_levels(rng_levels, sample_level, runner.buffer, fresh_envs, buffer_envs)
        obs, env_state = reset_env(rng_reset, levels, env_params)
        carry = initial_carry(ppo.num_envs, ppo.lstm_size)
        # ROLLOUT
        start = placement.split_envs(RolloutState(obs, env_state, carry, reset=jnp.ones(ppo.num_envs, bool)))
        transitions, end = rollout(rng_rollout, network, params, start, step_env, ppo.num_steps, unroll)
        # ADVANTAGES
        _, _, last_value = network.apply(params, end.carry, add_time_axis(end.obs), end.reset[None])
        advantages, targets = compute_gae(transitions, last_value[0], ppo.gamma, ppo.gae_lambda)
        # PPO UPDATE
        train_state, ppo_metrics = ppo_update(
            rng_ppo, runner.train_state, network, carry, transitions, advantages, targets, ppo.settings
        )
        finite = all_finite((ppo_metrics["ppo/loss"], train_state.params, train_state.opt_state))
        block = lambda envs: jax.tree.map(lambda x: x[:, envs], transitions)  # noqa: E731
        metrics = {
            **episode_metrics(transitions),
            **{
                key.replace("train/", "train_fresh/"): v
                for key, v in episode_metrics(block(slice(0, fresh_envs))).items()
            },
            **{
                key.replace("train/", "train_buffer/"): v
                for key, v in episode_metrics(block(slice(fresh_envs, None))).items()
            },
            **ppo_metrics,
            "sfl/buffer_learnability": runner.learnability.mean(),
            "sfl/buffer_max_learnability": runner.learnability.max(),
            "sfl/buffer_success": runner.success.mean(),
            "sfl/learnable_fraction": runner.learnable_fraction,
            "sfl/scored_success": runner.scored_success,
            "sfl/refreshed_at": runner.refreshed_at.astype(jnp.float32),
            FINITE_METRIC: finite,
        }
        runner = runner.replace(
            train_state=train_state, rng=rng, update=runner.update + 1, student_updates=runner.student_updates + 1
        )
        return runner, (metrics, levels)

    def step_chunk(runner: RunnerState):
        runner, (metrics, levels) = jax.lax.scan(update, runner, None, run.log_interval)
        # LOGGING ONLY: the levels' shortest paths, one batched search for the chunk's updates rather than one each.
        return runner, {**metrics, **jax.vmap(lambda played: level_metrics(played, "level"))(levels)}

    # EVAL
    eval_carry = initial_carry(run.eval_episodes, ppo.lstm_size)
    evaluate_runner = heldout_evaluator(network.apply, student_params, eval_carry, run, env_params)

    def training_levels(runner: RunnerState) -> tuple[Level, dict]:
        """The most learnable buffer levels, labelled with their p."""
        top = jnp.argsort(-runner.learnability)[: min(ppo.num_envs, config.buffer_size)]
        return jax.tree.map(lambda x: x[top], runner.buffer), {"p": runner.success[top]}

    return over_seeds(
        config,
        placement,
        init=init,
        step=step_chunk,
        evaluate=evaluate_runner,
        levels=training_levels,
        policies={"student": student_params},
        before_step=refresh_seeds,
    )


if __name__ == "__main__":
    driver.main(Config, make_train, __doc__, __file__, HEADLINE_METRICS)
