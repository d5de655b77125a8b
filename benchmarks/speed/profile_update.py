"""Where the time of one training update goes: each phase of an update timed on its own.

Every phase is built from the functions of the method's script (rollout, compute_gae, ppo_update,
level_scores, the level buffer, the teacher), jitted, and run inside a `lax.scan` of `--iterations`
steps, because that is where training runs it: XLA compiles a loop body differently from straight-line
code (a convolution's weight gradient ran 20-100x slower inside a loop on XLA:CPU before `Conv3x3`).
Reports the median over `--repeats` calls of the seconds per iteration, one seed, the paper settings, with
XLA's count of the floating-point operations of each phase and the rate that gives (XLA counts a loop body once:
multiply a phase's count by the trip counts of its loops, e.g. PPO's epochs, for its real work); `--algo paired`
adds a plain matmul of the teacher's input-projection size as the device's reference rate for dense work.

    python benchmarks/speed/profile_update.py --algo dr
    python benchmarks/speed/profile_update.py --algo plr
    python benchmarks/speed/profile_update.py --algo paired
"""

import functools
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import jax
import jax.numpy as jnp
import tyro
from flax.training.train_state import TrainState

# SCAFFOLDING: make `benchmarks`, `algos`, `envs` and `common` importable when run as a script.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.speed.bench_algos import load_algo, warm_buffers  # noqa: E402
from common import level_buffer  # noqa: E402
from common.config import with_flags  # noqa: E402
from common.provenance import describe_environment  # noqa: E402
from envs import teacher  # noqa: E402
from envs.levels import mutate_level, sample_dr_level  # noqa: E402
from envs.maze import reset_to_fresh_levels, reset_to_level, step_and_next_level, step_and_restart  # noqa: E402


@dataclass(frozen=True)
class Args:
    algo: Literal["dr", "plr", "accel", "paired"] = "dr"
    """dr (levels, rollout, GAE, PPO), plr (adds level scores and the buffer; the parallel variants run
    the same phases on more envs), accel (adds mutation) or paired (the teacher, and each student)."""
    num_envs: int = 32
    """Parallel envs."""
    num_steps: int = 256
    """Rollout length."""
    iterations: int = 2
    """Loop steps per timed call."""
    repeats: int = 3
    """Timed calls per phase; the median is reported."""


def time_phase(name: str, body, carry, args: Args) -> dict:
    """Seconds per iteration of `body(carry, rng) -> carry` inside a jitted scan."""

    def loop(carry, rng):
        return jax.lax.scan(lambda c, r: (body(c, r), None), carry, jax.random.split(rng, args.iterations))[0]

    started = time.perf_counter()
    compiled = jax.jit(loop).lower(carry, jax.random.key(0)).compile()
    compile_s = time.perf_counter() - started
    jax.block_until_ready(compiled(carry, jax.random.key(0)))
    durations = []
    for repeat in range(args.repeats):
        started = time.perf_counter()
        jax.block_until_ready(compiled(carry, jax.random.key(repeat + 1)))
        durations.append((time.perf_counter() - started) / args.iterations)
    seconds = statistics.median(durations)
    flops = compiled_flops(compiled)
    return {
        "phase": name,
        "s_per_update": round(seconds, 4),
        "compile_s": round(compile_s, 2),
        "gflop_per_update": round(flops / 1e9, 2),
        "gflop_per_s": round(flops / 1e9 / seconds, 1),
    }


def compiled_flops(compiled) -> float:
    """Floating-point operations of one call as XLA's cost analysis counts them: a multiply-add is two, and the
    body of a loop XLA keeps as a loop (a scan over steps or epochs, or time_phase's iterations) is counted once,
    whatever its trip count."""
    analysis = compiled.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, list) else analysis
    return float(analysis.get("flops", 0.0))


def matmul_reference(args: Args) -> dict:
    """The rate of a plain float32 matmul in a scan, as large as the teacher's input projection (1,984 x 21,692
    by 21,692 x 1,024): what this device reaches on dense work, the ceiling for a phase made of such matmuls."""
    rng_a, rng_b = jax.random.split(jax.random.key(0))
    a, b = jax.random.normal(rng_a, (1984, 21692)), jax.random.normal(rng_b, (21692, 1024))

    def multiply(total, rng):
        return total + 1e-9 * (a * (1.0 + total) @ b).sum()  # every entry used: XLA cannot slice the product

    return time_phase("reference: one 1984 x 21692 x 1024 matmul", multiply, jnp.zeros(()), args)


def touch(total: jax.Array, tree) -> jax.Array:
    """Depend on every output, so no phase is optimized away and no iteration is hoisted out of the loop."""
    return total + sum(leaf.ravel()[0].astype(jnp.float32) for leaf in jax.tree.leaves(tree))


def student_phases(module, config, args: Args, train_state: TrainState, restart: bool):
    """Levels, rollout, GAE and PPO of one student; `restart` replays each level (PLR, PAIRED) instead of
    resampling a fresh one where an episode ends (DR). Returns (transitions, advantages, phase timings)."""
    network = module.ActorCritic()
    env_params = config.env_params
    sample_level = functools.partial(
        sample_dr_level, height=config.env.maze_size, width=config.env.maze_size, n_walls=config.env.n_walls
    )
    if restart:
        step_env = jax.vmap(functools.partial(step_and_restart, params=env_params))
    else:
        step_env = jax.vmap(functools.partial(step_and_next_level, params=env_params))
    carry = module.initial_carry(args.num_envs, config.ppo.lstm_size)

    def start_state(rng):
        if restart:
            levels = jax.vmap(sample_level)(jax.random.split(rng, args.num_envs))
            obs, env_state = jax.vmap(reset_to_level, (None, 0, None))(rng, levels, env_params)
        else:  # DR: every episode's fresh level made up front, as dr.py does
            fresh = jax.vmap(jax.vmap(sample_level))(jax.random.split(rng, (args.num_envs, -(-args.num_steps // 4))))
            obs, env_state = jax.vmap(reset_to_fresh_levels, (None, 0, None))(rng, fresh, env_params)
            levels = jax.tree.map(lambda x: x[:, 0], fresh)
        return levels, module.RolloutState(obs, env_state, carry, jnp.ones(args.num_envs, bool))

    def play(rng):
        _, start = start_state(rng)
        transitions, end = module.rollout(rng, network, train_state.params, start, step_env, args.num_steps, 1)
        _, _, last_value = network.apply(train_state.params, end.carry, module.add_time_axis(end.obs), end.reset[None])
        return transitions, last_value[0]

    transitions, last_value = jax.jit(play)(jax.random.key(1))
    advantages, targets = jax.jit(module.compute_gae, static_argnums=(2, 3))(
        transitions, last_value, config.ppo.gamma, config.ppo.gae_lambda
    )

    def gae(total, rng):
        return touch(
            total, module.compute_gae(transitions, last_value + total, config.ppo.gamma, config.ppo.gae_lambda)
        )

    def ppo(state, rng):
        return module.ppo_update(rng, state, network, carry, transitions, advantages, targets, config.ppo.settings)[0]

    zero = jnp.zeros(())
    phases = [
        time_phase("levels: generate and reset", lambda total, rng: touch(total, start_state(rng)), zero, args),
        time_phase("rollout: policy and env steps", lambda total, rng: touch(total, play(rng)), zero, args),
        time_phase("advantages: GAE", gae, zero, args),
        time_phase("PPO update: epochs x minibatches of BPTT", ppo, train_state, args),
    ]
    return transitions, advantages, phases


def replay_phases(module, config, args: Args, buffer: level_buffer.LevelBuffer, transitions, advantages):
    """Level scores and the buffer's work in one update; ACCEL's mutation where the script has one."""
    settings = config.buffer_settings
    zeros = jnp.zeros(args.num_envs)
    sample_level = functools.partial(
        sample_dr_level, height=config.env.maze_size, width=config.env.maze_size, n_walls=config.env.n_walls
    )

    levels = jax.vmap(sample_level)(jax.random.split(jax.random.key(0), args.num_envs))
    no_history = level_buffer.LevelHistory(zeros, zeros, zeros)

    def scores(total, rng):
        return touch(
            total,
            module.level_scores(
                transitions,
                advantages + total,
                levels,
                no_history,
                config.score_function,
                config.maxmc_running_max,
                config.learnability_decay,
                config.env.max_steps,
            ),
        )

    def sample(buffer, rng):
        return level_buffer.sample_replay(rng, buffer, args.num_envs, **settings)[0]

    def write(buffer, rng):
        slots = jax.random.randint(rng, (args.num_envs,), 0, buffer.capacity)
        levels = jax.vmap(sample_level)(jax.random.split(rng, args.num_envs))
        new_scores = jax.random.uniform(rng, (args.num_envs,))
        buffer = level_buffer.update_slots(buffer, slots, new_scores, new_scores)
        mutations = jnp.zeros(args.num_envs, jnp.int32)
        return level_buffer.insert_many(buffer, levels, new_scores, new_scores, mutations, **settings)[0]

    phases = [
        time_phase(f"level scores: {config.score_function}", scores, jnp.zeros(()), args),
        time_phase("buffer: sample replay levels", sample, buffer, args),
        time_phase("buffer: update replayed slots, insert fresh levels (generation included)", write, buffer, args),
    ]
    if hasattr(config, "num_edits"):

        def mutate(total, rng):
            parents = jax.tree.map(lambda x: x[: args.num_envs], buffer.levels)
            rngs = jax.random.split(rng, args.num_envs)
            return touch(total, jax.vmap(mutate_level, (0, 0, None))(rngs, parents, config.num_edits))

        phases.append(time_phase(f"mutation: {config.num_edits} edits per level", mutate, jnp.zeros(()), args))
    return phases


def teacher_phases(module, config, args: Args, teacher_state: TrainState) -> list[dict]:
    teacher_params = config.teacher_params
    designer = module.TeacherNetwork(
        teacher_params.num_actions, teacher_params.episode_steps, config.teacher_conv_filters
    )
    carry = module.initial_carry(args.num_envs, config.teacher_lstm_size)

    def step_teacher_env(rngs, states, actions):
        obs, states, done = jax.vmap(functools.partial(teacher.step, params=teacher_params))(rngs, states, actions)
        return obs, states, jnp.zeros(done.shape), done, {}

    def design(rng):
        obs, states = jax.vmap(teacher.reset, (0, None))(jax.random.split(rng, args.num_envs), teacher_params)
        start = module.RolloutState(obs, states, carry, jnp.ones(args.num_envs, bool))
        return module.rollout(
            rng, designer, teacher_state.params, start, step_teacher_env, teacher_params.episode_steps, 1
        )[0]

    transitions = jax.jit(design)(jax.random.key(1))
    advantages, targets = module.compute_gae(
        transitions, jnp.zeros(args.num_envs), config.teacher_gamma, config.teacher_gae_lambda
    )
    return [
        time_phase("teacher: design rollout (62 steps)", lambda t, rng: touch(t, design(rng)), jnp.zeros(()), args),
        time_phase(
            "teacher: PPO update",
            lambda state, rng: module.ppo_update(
                rng, state, designer, carry, transitions, advantages, targets, config.teacher_ppo
            )[0],
            teacher_state,
            args,
        ),
    ]


def main(args: Args) -> None:
    module = load_algo(args.algo)
    config = with_flags(module.Config(), num_envs=args.num_envs, num_steps=args.num_steps)
    runner = warm_buffers(jax.jit(module.make_train(config).init)(jax.random.split(jax.random.key(0), 1)), config)
    runner = jax.tree.map(lambda x: x[0], runner)
    if args.algo == "paired":
        protagonist = jax.tree.map(lambda x: x[0], runner.students)
        _, _, phases = student_phases(module, config, args, protagonist, restart=True)
        phases = teacher_phases(module, config, args, runner.teacher) + [
            {**phase, "phase": f"each student, {phase['phase']}"} for phase in phases
        ]
        phases.append(matmul_reference(args))
    else:
        restart = args.algo != "dr"
        transitions, advantages, phases = student_phases(module, config, args, runner.train_state, restart)
        if restart:
            phases += replay_phases(module, config, args, runner.buffer, transitions, advantages)
    environment = describe_environment()
    for phase in phases:
        print(json.dumps({"algo": args.algo, "num_envs": args.num_envs, "num_steps": args.num_steps, **phase}))
    setting = f"{args.algo}, {args.num_envs} envs x {args.num_steps} steps"
    print(f"\n{setting}, {environment['device']}, commit {environment['commit']}")
    print("\n| phase | s per update | compile s | GFLOP (XLA's count) | GFLOP/s |\n|---|---:|---:|---:|---:|")
    for phase in phases:
        numbers = ("s_per_update", "compile_s", "gflop_per_update", "gflop_per_s")
        row = [phase["phase"], *(phase[key] for key in numbers)]
        print("| " + " | ".join(map(str, row)) + " |")


if __name__ == "__main__":
    main(tyro.cli(Args))
