"""PAIRED on AMaze: a teacher policy designs mazes to maximize the regret between two students.

Dennis et al., 2020, "Emergent Complexity and Zero-shot Transfer via Unsupervised Environment Design";
reference implementation: minimax-lib 0.2.0 `PAIREDRunner` with the shipped maze config (docs/methods.md).
Every update the teacher designs `num_envs` levels in 62-step episodes (envs/teacher.py), each student
plays 256 steps on them with restarts, both students take a PPO update, and the teacher takes its own
PPO update with the UED score as its final reward:
  relative_regret (PAIRED, 2 students): max(0, antagonist's max return - protagonist's mean return);
  population_regret (population PAIRED, 2+ students): max over students of max return - mean of means;
  neg_return (minimax adversary, 1 student): minus the protagonist's mean return.
The protagonist (student 0) is the policy evaluated on held-out mazes. Unlike minimax, the teacher's own
learning rate and schedule are used. Diff against: algos/dr.py.

Cost: the teacher's conv features feed its LSTM directly, about 22M parameters at 13x13 (counted in
tests/test_paired.py); benchmarks/README.md measures its share of an update.

    python algos/paired.py --num-seeds 2 --run-name paired_demo
"""

import sys
from pathlib import Path

# SCAFFOLDING: the repo root on sys.path, so that `python algos/<script>.py` imports envs and common; then Ctrl+C
# while the libraries below load ends the script quietly (common/quiet_start.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common.quiet_start  # noqa: F401, I001 (first: before the libraries load)

import functools
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
)
from common.contract import FINITE_METRIC, BatchedOverSeeds, all_finite, over_seeds
from common.devices import make_placement, scan_unroll
from common.heldout_eval import heldout_evaluator
from envs import teacher
from envs.levels import sample_empty_level, shortest_path_length, wall_count
from envs.maze import NUM_ACTIONS, EnvParams, Level, Observation, reset_to_level, step_and_restart

STUDENT_COUNTS = {"relative_regret": (2, 2), "population_regret": (2, None), "neg_return": (1, 1)}
"""Allowed --num-students per --ued-score: (minimum, maximum or None)."""


@dataclass(frozen=True)
class Environment:
    maze_size: Annotated[int, Range(2, 101)] = 13
    """Interior height and width of designed mazes."""
    n_walls: Annotated[int, NON_NEGATIVE] = 60
    """Wall placements per design episode (the teacher's budget; repeats allowed)."""
    max_steps: Annotated[int, AT_LEAST_ONE] = 250
    """Episode length limit on designed levels."""
    agent_view_size: Annotated[int, Range(3)] = 5
    """Side of the students' egocentric view (odd)."""


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
    ued_score: Literal["relative_regret", "population_regret", "neg_return"] = "relative_regret"
    """The teacher's reward: PAIRED's relative regret, population regret, or the minimax adversary's."""
    num_students: Annotated[int, AT_LEAST_ONE] = 2
    """Students playing every designed level: 2 for PAIRED, 2 or more for population PAIRED, 1 for minimax."""
    teacher_lr: Annotated[float, NON_NEGATIVE] = 1e-4
    """The teacher's Adam learning rate (0 keeps its initial random policy)."""
    teacher_anneal_lr: bool = False
    """Anneal the teacher's learning rate linearly to 0 over --total-updates."""
    teacher_ent_coef: Annotated[float, NON_NEGATIVE] = 0.05
    """The teacher's entropy bonus (docs/methods.md)."""
    teacher_gamma: Annotated[float, FRACTION] = 0.995
    """The teacher's discount over its design episode."""
    teacher_gae_lambda: Annotated[float, FRACTION] = 0.98
    """The teacher's GAE lambda."""
    teacher_lstm_size: Annotated[int, AT_LEAST_ONE] = 256
    """LSTM units of the teacher."""
    teacher_conv_filters: Annotated[int, AT_LEAST_ONE] = 128
    """3x3 conv filters of the teacher on the bordered map."""
    noise_dim: Annotated[int, AT_LEAST_ONE] = 50
    """Size of the U(0, 1) noise vector in each teacher observation."""
    env: Annotated[Environment, OmitArgPrefixes] = Environment()
    """Environment: the mazes the teacher designs."""
    ppo: Annotated[PPO, OmitArgPrefixes] = PPO()
    """PPO and the students (docs/methods.md, PAIRED column); the teacher shares clip, epochs, minibatches, vf coef."""
    run: Annotated[RunConfig, OmitArgPrefixes] = RunConfig(run_name="paired", screenshot_interval=100)
    """Run: seeds, length (minimax's budget: 30,000 updates, one PPO step per agent each), folder, logs, evaluation."""

    def __post_init__(self):
        least, most = STUDENT_COUNTS[self.ued_score]
        allowed = f"exactly {least}" if least == most else f"at least {least}"
        raise_first(range_problems(self))
        env, ppo = self.env, self.ppo
        raise_first(
            [
                *run_problems(self.run, ppo.num_envs),
                *maze_and_ppo_problems(env, ppo),
                (
                    self.num_students < least or (most is not None and self.num_students > most),
                    f"--ued-score {self.ued_score} needs {allowed} students, got --num-students {self.num_students}",
                ),
            ]
        )

    @property
    def schedule_spans_run(self) -> bool:
        """Learning rates anneal over the run (the students' or the teacher's): a resume keeps its length."""
        return self.ppo.anneal_lr or self.teacher_anneal_lr

    @property
    def env_steps_per_update(self) -> int:
        """Student env steps (all students); the teacher's design steps are not counted."""
        return self.num_students * self.ppo.num_envs * self.ppo.num_steps

    @property
    def env_params(self) -> EnvParams:
        return EnvParams(max_steps=self.env.max_steps, agent_view_size=self.env.agent_view_size)

    @property
    def teacher_params(self) -> teacher.TeacherParams:
        return teacher.TeacherParams(
            height=self.env.maze_size, width=self.env.maze_size, n_walls=self.env.n_walls, noise_dim=self.noise_dim
        )

    @property
    def student_names(self) -> tuple[str, ...]:
        if self.ued_score == "population_regret":
            return tuple(f"student{i}" for i in range(self.num_students))
        return ("protagonist", "antagonist")[: self.num_students]

    @property
    def teacher_ppo(self) -> PPOSettings:
        """The PPO settings of the teacher's update: the students' with its own entropy bonus."""
        return self.ppo.settings._replace(ent_coef=self.teacher_ent_coef)


HEADLINE_METRICS = ("train/return", "ued/score")
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


def orthogonal_by_cholesky(key, shape, dtype=jnp.float32) -> jax.Array:
    """`nn.initializers.orthogonal()` of a kernel at least 4 times taller than wide: the Q of the same Gaussian's QR
    (R's diagonal positive), computed as the Gaussian times the inverse of the Cholesky factor of its Gram matrix.
    The same values to float32 rounding (Q's columns are orthonormal to 1e-6 at that shape), and XLA:CPU's QR of
    one gate of the teacher's 21,692-wide input takes 13 s, this 1 s. Other shapes take flax's QR."""
    rows, columns = shape
    if rows < 4 * columns:
        return nn.initializers.orthogonal()(key, shape, dtype)
    gaussian = jax.random.normal(key, shape, dtype)
    upper = jnp.linalg.cholesky(jnp.matmul(gaussian.T, gaussian, precision="highest")).T
    return jax.scipy.linalg.solve_triangular(upper, gaussian.T, trans="T").T


def per_gate(init: nn.initializers.Initializer) -> nn.initializers.Initializer:
    """`init` for a [..., 4H] kernel of the four LSTM gates side by side, drawing each gate's [..., H] part on
    its own as flax's OptimizedLSTMCell and minimax's teacher do: the recurrent [H, 4H] kernel drawn orthogonal
    whole would leave no gate's part orthogonal, at half the scale (the tall input kernel's gates would come out
    orthogonal, but orthogonal to each other too, not drawn apart)."""

    def initializer(key, shape, dtype=jnp.float32):
        *rest, width = shape
        return jnp.concatenate([init(gate, (*rest, width // 4), dtype) for gate in jax.random.split(key, 4)], -1)

    return initializer


class HoistedLSTM(nn.Module):
    """An LSTM over time (carry zeroed where the previous step ended an episode) whose input projection
    W_x x_t is one matmul for all steps before the scan: the same math as an LSTM cell, but the teacher's
    21,692-wide input would otherwise re-read its 89 MB weight at every one of the 62 steps. Initialised as
    minimax's teacher LSTM: every gate's input and recurrent kernel orthogonal, biases zero."""

    features: int
    unroll: int = 1  # time steps per iteration of the scan (--unroll)

    @nn.compact
    def __call__(self, carry, inputs: jax.Array, reset: jax.Array):  # inputs [T, B, D], reset [T, B]
        projection = nn.Dense(4 * self.features, kernel_init=per_gate(orthogonal_by_cholesky))
        projected = projection(inputs)  # [T, B, 4H]
        scan = nn.scan(
            RecurrentGates,
            variable_broadcast="params",
            in_axes=0,
            out_axes=0,
            split_rngs={"params": False},
            unroll=self.unroll,
        )
        return scan(self.features, name="RecurrentGates_0")(carry, (projected, reset))


class RecurrentGates(nn.Module):
    """One step of `HoistedLSTM`'s recurrence, its input projection given."""

    features: int

    @nn.compact
    def __call__(self, carry, inputs):
        projected, reset = inputs
        cell, hidden = jax.tree.map(lambda c: jnp.where(reset[:, None], 0.0, c), carry)
        recurrent = nn.Dense(4 * self.features, use_bias=False, kernel_init=per_gate(nn.initializers.orthogonal()))
        gates = projected + recurrent(hidden)
        input_gate, forget_gate, candidate, output_gate = jnp.split(gates, 4, axis=-1)
        cell = nn.sigmoid(forget_gate) * cell + nn.sigmoid(input_gate) * jnp.tanh(candidate)
        hidden = nn.sigmoid(output_gate) * jnp.tanh(cell)
        return (cell, hidden), hidden


class TeacherNetwork(nn.Module):
    """The adversary (docs/methods.md): 3x3 conv on the bordered map so far, a time-step embedding (-> 10) and the
    noise vector feed an LSTM directly; policy over cells and value heads Dense(32)+tanh."""

    num_actions: int
    episode_steps: int
    conv_filters: int = 128
    unroll: int = 1  # time steps per iteration of the LSTM's scan (--unroll)

    @nn.compact
    def __call__(self, carry, obs: teacher.TeacherObservation, reset: jax.Array):  # leaves [T, B, ...]
        image = Conv3x3(self.conv_filters)(obs.image)
        image = nn.relu(image).reshape(*image.shape[:-3], -1)
        step_embedding = nn.Embed(self.episode_steps + 1, 10, embedding_init=nn.initializers.orthogonal())(obs.time)
        features = jnp.concatenate([image, step_embedding, obs.noise], -1)
        carry, hidden = HoistedLSTM(carry[0].shape[-1], self.unroll)(carry, features, reset)

        def head(outputs: int, last_init):
            layer = nn.Dense(32, kernel_init=nn.initializers.orthogonal(np.sqrt(2)))(hidden)
            return nn.Dense(outputs, kernel_init=last_init)(nn.tanh(layer))

        # Initialisers as minimax's teacher (`GridWorldACTeacherModel`): the first design policy is uniform.
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
    students: TrainState  # leaves [num_students, ...]: the protagonist first
    teacher: TrainState
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


def episode_returns(transitions: Transition) -> tuple[jax.Array, jax.Array]:
    """Per env: (mean, max) return over the episodes that ended in the rollout (0 where none did). AMaze
    pays reward only on the goal step, so an episode's return is its last step's reward."""
    finished = transitions.done.sum(0)
    mean = jnp.where(transitions.done, transitions.reward, 0.0).sum(0) / jnp.maximum(finished, 1)
    best = jnp.where(transitions.done, transitions.reward, -jnp.inf).max(0)
    return mean, jnp.where(finished > 0, best, 0.0)


def relative_regret(mean_returns: jax.Array, max_returns: jax.Array) -> jax.Array:
    """PAIRED: max(0, antagonist's max return - protagonist's mean return); inputs [students, envs]."""
    return jnp.maximum(0.0, max_returns[1] - mean_returns[0])


def population_regret(mean_returns: jax.Array, max_returns: jax.Array) -> jax.Array:
    """Population PAIRED: max over students of max return - mean over students of mean return."""
    return max_returns.max(0) - mean_returns.mean(0)


def negative_return(mean_returns: jax.Array, max_returns: jax.Array) -> jax.Array:
    """Minimax adversary: minus the protagonist's mean return."""
    del max_returns
    return -mean_returns[0]


UED_SCORES = {"relative_regret": relative_regret, "population_regret": population_regret, "neg_return": negative_return}


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


def make_optimizer(lr: float, anneal: bool, config: Config):
    ppo, run = config.ppo, config.run
    # The schedule spans the student updates of the run: optax counts only applied gradient steps.
    steps = (run.total_student_updates or run.total_updates) * ppo.num_epochs * ppo.num_minibatches
    learning_rate = optax.linear_schedule(lr, 0.0, steps) if anneal else lr
    return optax.chain(optax.clip_by_global_norm(ppo.max_grad_norm), optax.adam(learning_rate, eps=ppo.adam_eps))


def make_train(config: Config) -> BatchedOverSeeds:
    env, ppo, run = config.env, config.ppo, config.run
    env_params, teacher_params = config.env_params, config.teacher_params
    unroll = scan_unroll(run.devices)
    student = ActorCritic(unroll=unroll)
    designer = TeacherNetwork(
        teacher_params.num_actions, teacher_params.episode_steps, config.teacher_conv_filters, unroll
    )
    step_student_env = jax.vmap(functools.partial(step_and_restart, params=env_params))
    reset_env = jax.vmap(reset_to_level, (None, 0, None))
    score_levels = UED_SCORES[config.ued_score]
    placement = make_placement(run, ppo.num_envs)

    def step_teacher_env(rngs, states, actions):
        obs, states, done = jax.vmap(functools.partial(teacher.step, params=teacher_params))(rngs, states, actions)
        return obs, states, jnp.zeros(done.shape), done, {}

    def init(rng) -> RunnerState:
        rng, rng_students, rng_teacher, rng_eval = jax.random.split(rng, 4)
        dummy_level = jax.vmap(functools.partial(sample_empty_level, height=env.maze_size, width=env.maze_size))(
            jax.random.split(rng, 1)
        )
        dummy_obs, _ = reset_env(rng, dummy_level, env_params)
        tx = make_optimizer(ppo.lr, ppo.anneal_lr, config)

        def init_student(rng_student):
            params = student.init(
                rng_student, initial_carry(1, ppo.lstm_size), add_time_axis(dummy_obs), jnp.zeros((1, 1), bool)
            )
            return TrainState.create(apply_fn=student.apply, params=params, tx=tx)

        dummy_design, _ = teacher.reset(rng, teacher_params)
        teacher_variables = designer.init(
            rng_teacher,
            initial_carry(1, config.teacher_lstm_size),
            jax.tree.map(lambda x: x[None, None], dummy_design),
            jnp.zeros((1, 1), bool),
        )
        teacher_tx = make_optimizer(config.teacher_lr, config.teacher_anneal_lr, config)
        return RunnerState(
            # lax.map: one student at a time (see common.devices.map_seeds on batched QRs).
            students=jax.lax.map(init_student, jax.random.split(rng_students, config.num_students)),
            teacher=TrainState.create(apply_fn=designer.apply, params=teacher_variables, tx=teacher_tx),
            rng=rng,
            rng_eval=rng_eval,
            update=jnp.int32(0),
            student_updates=jnp.int32(0),
        )

    def design_levels(rng, teacher_state: TrainState) -> tuple[Transition, Level]:
        """One design episode in each of num_envs teacher envs: transitions [62, num_envs] and the levels."""
        rng_reset, rng_design = jax.random.split(rng)
        obs, states = jax.vmap(teacher.reset, (0, None))(jax.random.split(rng_reset, ppo.num_envs), teacher_params)
        start = placement.split_envs(
            RolloutState(
                obs, states, initial_carry(ppo.num_envs, config.teacher_lstm_size), jnp.ones(ppo.num_envs, bool)
            )
        )
        transitions, end = rollout(
            rng_design, designer, teacher_state.params, start, step_teacher_env, teacher_params.episode_steps, unroll
        )
        return transitions, jax.vmap(teacher.to_level)(end.env_state)

    def play_and_learn(rng, student_state: TrainState, levels: Level):
        """One student: rollout on the designed levels with restarts, then its PPO update."""
        rng_rollout, rng_ppo = jax.random.split(rng)
        params = student_state.params
        obs, env_state = reset_env(rng_rollout, levels, env_params)
        carry = initial_carry(ppo.num_envs, ppo.lstm_size)
        start = placement.split_envs(RolloutState(obs, env_state, carry, reset=jnp.ones(ppo.num_envs, bool)))
        transitions, end = rollout(rng_rollout, student, params, start, step_student_env, ppo.num_steps, unroll)
        _, _, last_value = student.apply(params, end.carry, add_time_axis(end.obs), end.reset[None])
        advantages, targets = compute_gae(transitions, last_value[0], ppo.gamma, ppo.gae_lambda)
        student_state, ppo_metrics = ppo_update(
            rng_ppo, student_state, student, carry, transitions, advantages, targets, ppo.settings
        )
        mean_return, max_return = episode_returns(transitions)
        finished = transitions.done.sum()
        metrics = {
            **ppo_metrics,
            "return": jnp.where(transitions.done, transitions.reward, 0.0).sum() / finished,
            "solve_rate": (transitions.done & (transitions.reward > 0)).sum() / finished,
        }
        return student_state, metrics, mean_return, max_return

    def update(runner: RunnerState, _):
        rng, rng_design, rng_students, rng_teacher_ppo = jax.random.split(runner.rng, 4)
        # CURRICULUM: the teacher designs this update's levels.
        teacher_transitions, levels = design_levels(rng_design, runner.teacher)
        # ROLLOUT (and each student's PPO UPDATE): every student plays every designed level.
        students, student_metrics, mean_returns, max_returns = jax.vmap(play_and_learn, (0, 0, None))(
            jax.random.split(rng_students, config.num_students), runner.students, levels
        )
        # ADVANTAGES (teacher): the UED score is the reward of its last design step.
        score = score_levels(mean_returns, max_returns)  # [num_envs]
        teacher_transitions = teacher_transitions._replace(reward=teacher_transitions.reward.at[-1].set(score))
        advantages, targets = compute_gae(
            teacher_transitions, jnp.zeros(ppo.num_envs), config.teacher_gamma, config.teacher_gae_lambda
        )
        # PPO UPDATE (teacher)
        carry = initial_carry(ppo.num_envs, config.teacher_lstm_size)
        teacher_state, teacher_metrics = ppo_update(
            rng_teacher_ppo,
            runner.teacher,
            designer,
            carry,
            teacher_transitions,
            advantages,
            targets,
            config.teacher_ppo,
        )
        losses = (teacher_metrics["ppo/loss"], student_metrics["ppo/loss"])
        finite = all_finite(
            (students.params, students.opt_state, teacher_state.params, teacher_state.opt_state, losses)
        )
        metrics = {
            "train/return": student_metrics["return"][0],
            "train/solve_rate": student_metrics["solve_rate"][0],
            **{
                f"{name}/{key}": values[i]
                for i, name in enumerate(config.student_names)
                for key, values in student_metrics.items()
            },
            **{f"teacher/{key}": value for key, value in teacher_metrics.items()},
            "ued/score": score.mean(),
            FINITE_METRIC: finite,
        }
        runner = runner.replace(
            students=students,
            teacher=teacher_state,
            rng=rng,
            update=runner.update + 1,
            student_updates=runner.student_updates + 1,
        )
        return runner, (metrics, levels)

    def step_chunk(runner: RunnerState):
        runner, (metrics, levels) = jax.lax.scan(update, runner, None, run.log_interval)
        # LOGGING ONLY: the levels' shortest paths, one batched search for the chunk's updates rather than one each.
        return runner, {**metrics, **jax.vmap(lambda designed: level_metrics(designed, "level"))(levels)}

    def protagonist(runner: RunnerState):
        return jax.tree.map(lambda x: x[0], runner.students.params)

    # EVAL: the protagonist (student 0)
    eval_carry = initial_carry(run.eval_episodes, ppo.lstm_size)
    evaluate_runner = heldout_evaluator(student.apply, protagonist, eval_carry, run, env_params)

    def training_levels(runner: RunnerState) -> tuple[Level, dict]:
        """Levels the teacher designs now (no labels)."""
        return design_levels(jax.random.fold_in(runner.rng_eval, -1 - runner.update), runner.teacher)[1], {}

    # The policies by name, for `common.evaluate --policy`; the protagonist is also `student`, as in every method.
    students = {**{name: index for index, name in enumerate(config.student_names)}, "student": 0}
    policies = {
        name: lambda runner, i=index: jax.tree.map(lambda x: x[:, i], runner.students.params)
        for name, index in students.items()
    }
    return over_seeds(
        config,
        placement,
        init=init,
        step=step_chunk,
        evaluate=evaluate_runner,
        levels=training_levels,
        policies=policies,
    )


if __name__ == "__main__":
    driver.main(Config, make_train, __doc__, __file__, HEADLINE_METRICS)
