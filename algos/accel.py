"""ACCEL on AMaze: Robust PLR that starts from empty mazes and edits the levels it replays.

Parker-Holder et al., 2022, "Evolving Curricula with Regret-Based Environment Design"; reference
implementation: minimax-lib 0.2.0 `PLRRunner` with mutations and the shipped maze config
(docs/methods.md). This is algos/plr.py plus mutation. New levels are empty mazes (`--n-walls 0`). The
update after each replay update is a mutation update: it applies `--num-edits` random edits (wall flip,
goal move or no-op; envs/levels.py) to the levels just replayed, plays the mutants without a gradient
step, and inserts them like new levels, one mutation generation deeper than their parent. The run's budget
is the papers' (and minimax's): `--total-student-updates` counts the updates with a PPO step (replay updates;
with `--exploratory-grad-updates` new-level updates too, never mutation updates); `--total-updates` counts every
update (new, replay, mutation) and caps the run.

Cost of the data-dependent branches: the replay and mutation decisions select which levels are played
(jnp.where), so each update is one rollout, one GAE, one buffer update, one buffer insertion and one
mutation of `num_envs` levels whatever the seed decided. The PPO step is a lax.cond: a one-seed run skips
it on new-level and mutation updates; vmapped over seeds the cond computes the step for every seed and
keeps it where the seed learned. Diff against: algos/plr.py.

    python algos/accel.py --num-seeds 2 --run-name accel_demo
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
from typing import Annotated, Literal, NamedTuple

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from flax.training.train_state import TrainState
from tyro.conf import OmitArgPrefixes

from common import driver, level_buffer, ued_scores
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
from common.devices import make_placement, scan_unroll
from common.heldout_eval import heldout_evaluator
from envs.levels import mutate_level, optimal_steps, sample_dr_level, shortest_path_length, wall_count
from envs.maze import NUM_ACTIONS, EnvParams, Level, Observation, reset_to_level, step_and_restart


@dataclass(frozen=True)
class Environment:
    maze_size: Annotated[int, Range(2, 101)] = 13
    """Interior height and width of training mazes."""
    n_walls: Annotated[int, NON_NEGATIVE] = 0
    """Wall cells drawn with replacement per new level (ACCEL starts from empty mazes)."""
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


# copied from algos/plr.py:PPO
@dataclass(frozen=True)
class PPO:
    num_envs: Annotated[int, AT_LEAST_ONE] = 32
    """Parallel envs per seed."""
    num_steps: Annotated[int, AT_LEAST_ONE] = 256
    """Rollout length per update; PPO back-propagates through all of it."""
    lr: Annotated[float, POSITIVE] = 3e-4
    """Adam learning rate."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 over --total-student-updates, else --total-updates (minimax: off)."""
    adam_eps: Annotated[float, POSITIVE] = 1e-5
    """Adam epsilon."""
    gamma: Annotated[float, FRACTION] = 0.999
    """Discount."""
    gae_lambda: Annotated[float, FRACTION] = 0.98
    """GAE lambda."""
    num_epochs: Annotated[int, AT_LEAST_ONE] = 5
    """PPO epochs per update."""
    num_minibatches: Annotated[int, AT_LEAST_ONE] = 1
    """Minibatches per epoch, split along envs (1: the whole rollout is one minibatch)."""
    clip_eps: Annotated[float, POSITIVE] = 0.2
    """PPO clip range for the ratio and the value."""
    ent_coef: Annotated[float, NON_NEGATIVE] = 0.0
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
    replay_prob: Annotated[float, FRACTION] = 0.8
    """Probability of a replay update once the buffer is warm."""
    buffer_size: Annotated[int, AT_LEAST_ONE] = 4000
    """Level buffer capacity per seed."""
    min_fill_ratio: Annotated[float, Range(0, 1, above=True)] = 0.5
    """Replay only once this fraction of the buffer is filled."""
    score_function: Literal["max_mc", "pvl", "l1_value_loss", "learnability", "true_regret"] = "max_mc"
    """Level score: MaxMC, PVL, L1 value loss, learnability (success rate p over all plays: p(1-p)), or exact regret."""
    maxmc_running_max: bool = True
    """MaxMC's R_max: the highest return ever reached on a level (papers); off: its last rollout's best (minimax)."""
    learnability_decay: Annotated[float, FRACTION] = 1.0
    """Learnability: per play of a level, the weight its earlier outcomes keep (1: every play counts alike)."""
    prioritization: Literal["rank", "proportional"] = "rank"
    """Score prioritization of the replay distribution (rank suits MaxMC, which can be negative)."""
    rank_ties: Literal["shared", "slot_order"] = "shared"
    """Equal scores under rank prioritization: equal replay probability, or the first slot first (minimax)."""
    temperature: Annotated[float, POSITIVE] = 0.3
    """Temperature of the score prioritization."""
    staleness_coef: Annotated[float, FRACTION] = 0.5
    """Weight of staleness in the replay distribution."""
    exploratory_grad_updates: bool = False
    """Also take PPO steps on new levels (never on mutants, as minimax); off: learn only from replayed levels."""
    num_edits: Annotated[int, AT_LEAST_ONE] = 20
    """Random edits per mutant (each a wall flip, a goal move or a no-op)."""
    mutation_criterion: Literal["batch", "easy", "hard"] = "batch"
    """Replayed levels to mutate: all (batch), or --mutation-subsample-size lowest- (easy) or highest-scoring (hard)."""
    mutation_subsample_size: Annotated[int, AT_LEAST_ONE] = 4
    """Parents per mutation update for the easy and hard criteria (must divide --num-envs)."""
    env: Annotated[Environment, OmitArgPrefixes] = Environment()
    """Environment: AMaze training levels."""
    ppo: Annotated[PPO, OmitArgPrefixes] = PPO()
    """PPO and the student network (docs/methods.md, ACCEL column)."""
    run: Annotated[RunConfig, OmitArgPrefixes] = RunConfig(
        run_name="accel", total_updates=100_000, total_student_updates=30_000, screenshot_interval=100
    )
    """Run: seeds, length (minimax's 30,000 student updates, capped at 100,000 updates), folder, logging, evaluation."""

    def __post_init__(self):
        raise_first(range_problems(self))
        env, ppo = self.env, self.ppo
        raise_first(
            [
                *run_problems(self.run, ppo.num_envs),
                *maze_and_ppo_problems(env, ppo),
                (
                    self.buffer_size < self.ppo.num_envs,
                    f"--buffer-size ({self.buffer_size}) must hold at least --num-envs ({self.ppo.num_envs}) levels",
                ),
                (
                    self.learnability_decay != 1.0 and self.score_function != "learnability",
                    f"--learnability-decay ({self.learnability_decay}) weighs the outcomes learnability counts; "
                    f"--score-function {self.score_function} does not use it",
                ),
                (
                    self.mutation_criterion != "batch" and ppo.num_envs % self.mutation_subsample_size != 0,
                    f"--mutation-subsample-size ({self.mutation_subsample_size}) must divide --num-envs "
                    f"({ppo.num_envs}) for the {self.mutation_criterion} criterion",
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
    def buffer_settings(self) -> dict:
        return dict(
            temperature=self.temperature,
            staleness_coef=self.staleness_coef,
            prioritization=self.prioritization,
            ties=self.rank_ties,
        )


HEADLINE_METRICS = ("train/return", "buffer/replay_fraction", "buffer/fill")
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
    buffer: level_buffer.LevelBuffer
    mutate_next: jax.Array  # bool[]: the last update replayed levels, so this one mutates them
    mutation_parents: Level  # [num_envs], the levels the next mutation update edits
    mutation_parent_generations: jax.Array  # int32[num_envs], their mutation generations
    rng: jax.Array
    rng_eval: jax.Array  # fixed per seed; evaluation keys are folded with the update so training never depends on them
    update: jax.Array  # int32[], updates done
    student_updates: jax.Array  # int32[], student PPO updates done (what the papers budget)


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


# copied from algos/plr.py:level_scores
def level_scores(
    transitions: Transition,
    advantages: jax.Array,
    levels: Level,
    before: level_buffer.LevelHistory,
    score_function: str,
    running_max: bool,
    learnability_decay: float,
    max_steps: int,
) -> tuple[jax.Array, level_buffer.LevelHistory]:
    """Per env (= per level): (score, the history to keep in its slot) from its rollout. Inputs [T, B]; `before`
    is what the levels' slots hold (zeros for levels not in the buffer): learnability's success rate counts the
    episodes finished on the level since it entered the buffer, each earlier play's weighed down by
    `learnability_decay` per play since."""
    per_env = lambda x: jnp.moveaxis(x, 0, 1)  # noqa: E731
    rewards, dones, values, advantages = map(
        per_env, (transitions.reward, transitions.done, transitions.value, advantages)
    )
    successes, failures = jax.vmap(ued_scores.outcome_counts)(rewards, dones)
    successes = before.successes * learnability_decay + successes
    failures = before.failures * learnability_decay + failures
    if score_function == "max_mc":
        scores, max_returns = jax.vmap(functools.partial(ued_scores.max_mc, running_max=running_max))(
            rewards, dones, values, before.max_return
        )
        return scores, level_buffer.LevelHistory(max_returns, successes, failures)
    _, best = jax.vmap(ued_scores.episode_returns)(rewards, dones)
    highest = jnp.maximum(before.max_return, best) if running_max else best
    max_returns = jnp.where(dones.any(1), highest, before.max_return)
    if score_function == "learnability":
        scores = ued_scores.learnability(successes, failures)
    elif score_function == "true_regret":
        steps = jax.vmap(functools.partial(optimal_steps, limit=max_steps))(levels)
        scores = jax.vmap(ued_scores.true_regret, (0, 0, 0, None))(rewards, dones, steps, max_steps)
    else:
        value_loss = ued_scores.positive_value_loss if score_function == "pvl" else ued_scores.l1_value_loss
        scores = jax.vmap(value_loss)(advantages, dones)
    return scores, level_buffer.LevelHistory(max_returns, successes, failures)


# copied from algos/plr.py:select
def select(condition: jax.Array, on_true, on_false):
    return jax.tree.map(lambda a, b: jnp.where(condition, a, b), on_true, on_false)


# copied from algos/plr.py:buffer_metrics
def buffer_metrics(buffer: level_buffer.LevelBuffer) -> dict:
    filled = buffer.filled.sum()
    return {
        "buffer/fill": level_buffer.fill_ratio(buffer),
        "buffer/mean_score": jnp.where(buffer.filled, buffer.scores, 0.0).sum() / jnp.maximum(filled, 1),
        "buffer/max_score": jnp.where(buffer.filled, buffer.scores, -jnp.inf).max(),
    }


# copied from algos/plr.py:chunk_end_metrics
def chunk_end_metrics(buffer: level_buffer.LevelBuffer, settings: dict, num_updates: int) -> dict:
    """Metrics of the buffer a chunk of `num_updates` updates ends with, at its last update (NaN at the others,
    which the logs skip): the replay distribution takes a sort of the buffer, once per chunk rather than per update."""
    probs = level_buffer.replay_probabilities(buffer, **settings)
    at_end = lambda value: jnp.full(num_updates, jnp.nan).at[-1].set(value)  # noqa: E731
    filled_scores = jnp.where(buffer.filled, buffer.scores, jnp.nan)
    quantiles = jnp.nanquantile(filled_scores, jnp.array([0.1, 0.5, 0.9]))
    return {
        "buffer/weighted_staleness": at_end((probs * buffer.ages).sum()),
        # minimax's plr/weighted_ued_score: the scores (empty slots 0) under the replay distribution
        "buffer/weighted_score": at_end((probs * jnp.where(buffer.filled, buffer.scores, 0.0)).sum()),
        "buffer/top_replay_probability": at_end(probs.max()),
        "buffer/replay_entropy": at_end(-jnp.sum(jnp.where(probs > 0, probs * jnp.log(probs), 0.0))),
        **{f"buffer/score_q{q}": at_end(value) for q, value in zip((10, 50, 90), quantiles, strict=True)},
    }


def mutation_parents(levels: Level, scores: jax.Array, generations: jax.Array, criterion: str, subsample: int):
    """The `num_envs` parents of the next mutants among this replay batch (levels [B], scores and
    generations [B]): the batch itself, or its `subsample` lowest- (easy) or highest-scoring (hard)
    levels, each repeated B / subsample times. Returns (levels, generations)."""
    if criterion == "batch":
        return levels, generations
    order = jnp.argsort(scores if criterion == "easy" else -scores)[:subsample]
    chosen = jnp.tile(order, scores.shape[0] // subsample)
    return jax.tree.map(lambda x: x[chosen], levels), generations[chosen]


def mutation_metrics(buffer: level_buffer.LevelBuffer) -> dict:
    """Mutation generations of the filled buffer slots."""
    generations = jnp.where(buffer.filled, buffer.mutations, 0)
    return {
        "buffer/mean_mutations": generations.sum() / jnp.maximum(buffer.filled.sum(), 1),
        "buffer/max_mutations": generations.max().astype(jnp.float32),
    }


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
    settings = config.buffer_settings

    def init(rng) -> RunnerState:
        rng, rng_params, rng_eval = jax.random.split(rng, 3)
        dummy_level = jax.vmap(sample_level)(jax.random.split(rng, 1))
        dummy_obs, _ = reset_env(rng, dummy_level, env_params)
        params = network.init(
            rng_params, initial_carry(1, ppo.lstm_size), add_time_axis(dummy_obs), jnp.zeros((1, 1), bool)
        )
        train_state = TrainState.create(apply_fn=network.apply, params=params, tx=make_optimizer(config))
        buffer = level_buffer.empty_buffer(jax.tree.map(lambda x: x[0], dummy_level), config.buffer_size)
        initial_mutation_parents = jax.tree.map(lambda x: jnp.repeat(x, ppo.num_envs, axis=0), dummy_level)
        return RunnerState(
            train_state=train_state,
            buffer=buffer,
            mutate_next=jnp.bool_(False),
            mutation_parents=initial_mutation_parents,
            mutation_parent_generations=jnp.zeros(ppo.num_envs, jnp.int32),
            rng=rng,
            rng_eval=rng_eval,
            update=jnp.int32(0),
            student_updates=jnp.int32(0),
        )

    def update(runner: RunnerState, _):
        rng, rng_decide, rng_new, rng_replay, rng_rollout, rng_ppo, rng_mutate = jax.random.split(runner.rng, 7)
        params, buffer = runner.train_state.params, runner.buffer
        # CURRICULUM: mutate the levels the last update replayed; otherwise replay buffer levels (once warm,
        # with probability replay_prob) or play fresh levels. Mutants take the place of new levels.
        mutate = runner.mutate_next
        warm = level_buffer.fill_ratio(buffer) >= config.min_fill_ratio
        replay = warm & (jax.random.uniform(rng_decide) < config.replay_prob) & ~mutate
        mutants = jax.vmap(mutate_level, (0, 0, None))(
            jax.random.split(rng_mutate, ppo.num_envs), runner.mutation_parents, config.num_edits
        )
        fresh_levels = jax.vmap(sample_level)(jax.random.split(rng_new, ppo.num_envs))
        new_levels = select(mutate, mutants, fresh_levels)
        mutation_generations = jnp.where(mutate, runner.mutation_parent_generations + 1, 0)
        sampled_buffer, slots = level_buffer.sample_replay(rng_replay, buffer, ppo.num_envs, **settings)
        replay_levels = jax.tree.map(lambda x: x[slots], buffer.levels)
        levels = select(replay, replay_levels, new_levels)
        obs, env_state = reset_env(rng_new, levels, env_params)
        carry = initial_carry(ppo.num_envs, ppo.lstm_size)
        # ROLLOUT
        start = placement.split_envs(RolloutState(obs, env_state, carry, reset=jnp.ones(ppo.num_envs, bool)))
        transitions, end = rollout(rng_rollout, network, params, start, step_env, ppo.num_steps, unroll)
        # ADVANTAGES
        _, _, last_value = network.apply(params, end.carry, add_time_axis(end.obs), end.reset[None])
        advantages, targets = compute_gae(transitions, last_value[0], ppo.gamma, ppo.gae_lambda)
        # LEVEL SCORES -> BUFFER, one cycle of minimax's PLRManager: a new-level cycle ages every filled slot by
        # the levels it plays (a mutation cycle does not); a level equal to a filled slot (a replayed one, or a
        # new copy) scores against that slot's max return and updates it, the others compete for a slot; envs
        # that finished no episode are skipped.
        cycle = select(replay, sampled_buffer, select(mutate, buffer, level_buffer.age_filled(buffer, ppo.num_envs)))
        matched, _ = level_buffer.match_levels(cycle, levels)
        scores, history = level_scores(
            transitions,
            advantages,
            levels,
            level_buffer.slot_history(cycle, matched),
            config.score_function,
            config.maxmc_running_max,
            config.learnability_decay,
            env.max_steps,
        )
        finished = transitions.done.any(0)  # envs that completed an episode
        buffer, _ = level_buffer.insert_many(
            cycle,
            levels,
            scores,
            history.max_return,
            mutation_generations,
            **settings,
            active=finished,
            successes=history.successes,
            failures=history.failures,
        )
        parents, parent_generations = mutation_parents(
            replay_levels, scores, buffer.mutations[slots], config.mutation_criterion, config.mutation_subsample_size
        )

        # PPO UPDATE: Robust PLR takes the step only on replay updates; --exploratory-grad-updates (PLR) also on new
        # levels, never on mutants, whose rollout minimax's PLRRunner only scores. At one seed the other branch is
        # skipped; vmapped over seeds, lax.cond computes both and selects.
        def ppo_step():
            return ppo_update(
                rng_ppo, runner.train_state, network, carry, transitions, advantages, targets, ppo.settings
            )

        def no_ppo_step():  # NaN metrics, so logs average only the updates that took a step
            metrics = jax.eval_shape(ppo_step)[1]
            return runner.train_state, jax.tree.map(lambda m: jnp.full(m.shape, jnp.nan), metrics)

        learn = replay | (config.exploratory_grad_updates & ~mutate)
        train_state, ppo_metrics = jax.lax.cond(learn, ppo_step, no_ppo_step)
        finite = (~learn | jnp.isfinite(ppo_metrics["ppo/loss"])) & all_finite(
            (train_state.params, train_state.opt_state)
        )
        metrics = {
            **episode_metrics(transitions),
            "buffer/mutation_fraction": mutate.astype(jnp.float32),
            "buffer/mutant_generation": jnp.where(mutate, mutation_generations.mean(dtype=jnp.float32), jnp.nan),
            **mutation_metrics(buffer),
            **ppo_metrics,
            **buffer_metrics(buffer),
            "buffer/replay_fraction": replay.astype(jnp.float32),
            "buffer/level_score": scores.mean(),
            FINITE_METRIC: finite,
        }
        runner = runner.replace(
            train_state=train_state,
            buffer=buffer,
            mutate_next=replay,
            mutation_parents=select(replay, parents, runner.mutation_parents),
            mutation_parent_generations=jnp.where(replay, parent_generations, runner.mutation_parent_generations),
            rng=rng,
            update=runner.update + 1,
            student_updates=runner.student_updates + learn,
        )
        return runner, (metrics, (levels, replay, mutate))

    def step_chunk(runner: RunnerState):
        runner, (metrics, (levels, replay, mutate)) = jax.lax.scan(update, runner, None, run.log_interval)
        # LOGGING ONLY, once per chunk: the played levels' shortest paths (one batched search for the chunk's
        # updates) by kind, and the replay distribution of the buffer the chunk ends with.
        played = jax.vmap(lambda levels: level_metrics(levels, "level"))(levels)
        nan = jnp.float32(jnp.nan)
        return runner, {
            **metrics,
            **{key.replace("level/", "level_replay/"): jnp.where(replay, value, nan) for key, value in played.items()},
            **{
                key.replace("level/", "level_new/"): jnp.where(replay | mutate, nan, value)
                for key, value in played.items()
            },
            **{key.replace("level/", "level_mutant/"): jnp.where(mutate, value, nan) for key, value in played.items()},
            **chunk_end_metrics(runner.buffer, settings, run.log_interval),
        }

    # EVAL
    eval_carry = initial_carry(run.eval_episodes, ppo.lstm_size)
    evaluate_runner = heldout_evaluator(network.apply, student_params, eval_carry, run, env_params)

    def training_levels(runner: RunnerState) -> tuple[Level, dict]:
        """The highest-scoring buffer levels (empty slots last), labelled with their scores and mutation generations."""
        buffer = runner.buffer
        top = jnp.argsort(jnp.where(buffer.filled, -buffer.scores, jnp.inf))[: min(ppo.num_envs, config.buffer_size)]
        return jax.tree.map(lambda x: x[top], buffer.levels), {
            "score": buffer.scores[top],
            "mutations": buffer.mutations[top],
        }

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
