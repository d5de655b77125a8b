"""Time one minimax-lib 0.2.0 method at our benchmark protocol; run by bench_algos.py --minimax with the
Python of the minimax virtual environment (its pinned JAX 0.4.31 stack), never imported by our code.

Builds minimax's ExperimentRunner from the shipped maze config (minimax/config/configs/maze/<name>.json)
with the same envs and steps, times the compile of one jitted update (`lower().compile()`) and runs it.
Level-replay methods then get a full buffer, as bench_algos.py gives ours: random levels from minimax's
own generator, random scores and ages. Each timing runs one warm-up update and reports the median of
`--repeats` updates after `block_until_ready`.

At one seed minimax's sequential PLR and ACCEL decide with `lax.cond` whether to replay, and only a
replay update runs PPO (and, for ACCEL, plays the mutants: a second rollout), so an update's cost depends
on the draw. For those the worker times replay updates and new-level updates apart (replay probability
forced to 1 and to 0) and reports their mix at the shipped replay probability: the expected seconds and
env steps per update. Env steps count every rollout of every student and block.

    <minimax venv>/bin/python benchmarks/peers/minimax_worker.py --config dr --num-envs 32 --num-steps 256
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time
from importlib import metadata
from pathlib import Path

import jax
import jax.numpy as jnp
import minimax
from minimax.arguments import parser as minimax_parser
from minimax.runners import ExperimentRunner


def shipped_flags(name: str, overrides: dict) -> list[str]:
    path = Path(minimax.__file__).parent / "config" / "configs" / "maze" / f"{name}.json"
    params = {key: values[0] for key, values in json.loads(path.read_text())["args"].items()}
    params.update(overrides)
    return [f"--{key}={value}" for key, value in params.items() if value is not None]


def warm_buffer(runner, state: tuple) -> tuple:
    """The runner state with a full level buffer (state[1] is the train state on one device)."""
    train_state = state[1]
    buffer = train_state.plr_buffer
    num_students, capacity = buffer.scores.shape
    rng_levels, rng_scores, rng_ages = jax.random.split(jax.random.PRNGKey(1), 3)
    _, levels, _ = runner.benv.reset(jax.random.split(rng_levels, num_students), capacity, 1)
    scores = jax.random.uniform(rng_scores, (num_students, capacity))
    full = buffer.replace(
        levels=levels,
        scores=scores,
        max_returns=scores,
        ages=jax.random.randint(rng_ages, (num_students, capacity), 0, capacity).astype(buffer.ages.dtype),
        filled=jnp.ones_like(buffer.filled),
        filled_count=jnp.full_like(buffer.filled_count, capacity),
    )
    return (state[0], train_state.replace(plr_buffer=full), *state[2:])


def time_updates(runner, state: tuple, repeats: int) -> tuple[float, tuple]:
    """Median seconds of one update, and the state after the timed updates."""
    # `run` is jitted with the runner as a static argument, so a changed replay probability needs a retrace.
    jax.clear_caches()
    step = jax.jit(lambda s: runner.run(*s)).lower(state).compile()
    state = tuple(jax.block_until_ready(step(state))[1:])
    durations = []
    for _ in range(repeats):
        started = time.perf_counter()
        state = tuple(jax.block_until_ready(step(state))[1:])
        durations.append(time.perf_counter() - started)
    return statistics.median(durations), state


def main() -> None:
    cli = argparse.ArgumentParser()
    cli.add_argument("--config", required=True, help="minimax maze config: dr, paired, plr, accel, pplr, paccel")
    cli.add_argument("--num-envs", type=int, default=32)
    cli.add_argument("--num-steps", type=int, default=256)
    cli.add_argument("--repeats", type=int, default=3)
    options = cli.parse_args()
    overrides = {
        "n_parallel": options.num_envs,
        "n_rollout_steps": options.num_steps,
        "n_devices": 1,
        "verbose": False,
        "test_n_episodes": 10,
    }
    sys.argv = ["minimax.train", *shipped_flags(options.config, overrides)]
    args = minimax_parser.parse_args(preview=False)
    experiment = ExperimentRunner(
        train_runner=args.train_runner,
        env_name=args.env_name,
        agent_rl_algo=args.agent_rl_algo,
        student_model_name=args.student_model_name,
        teacher_model_name=args.teacher_model_name,
        train_runner_kwargs=args.train_runner_args,
        env_kwargs=args.env_args,
        ued_env_kwargs=args.ued_env_args,
        student_rl_kwargs=args.student_rl_args,
        teacher_rl_kwargs=args.teacher_rl_args,
        student_model_kwargs=args.student_model_args,
        teacher_model_kwargs=args.teacher_model_args,
        eval_kwargs=args.eval_args,
        eval_env_kwargs=args.eval_env_args,
        n_devices=1,
    )
    runner = experiment.runner
    reset_state = runner.reset(jax.random.PRNGKey(0))
    started = time.perf_counter()
    first_step = jax.jit(lambda s: runner.run(*s)).lower(reset_state).compile()
    compile_s = time.perf_counter() - started
    # PLR runners return one more state entry (the level buffer) than reset gives.
    state = tuple(jax.block_until_ready(first_step(reset_state))[1:])
    rollout_steps = runner.step_batch_size * runner.n_rollout_steps
    timings = {}
    if hasattr(runner, "plr_mgr"):
        state = warm_buffer(runner, state)
        shipped_replay_prob = runner.plr_mgr.replay_prob
        for replay_prob in (1.0,) if shipped_replay_prob == 1.0 else (1.0, 0.0):
            runner.plr_mgr.replay_prob = replay_prob
            timings[replay_prob], state = time_updates(runner, state, options.repeats)
        runner.plr_mgr.replay_prob = shipped_replay_prob
        per_update = shipped_replay_prob * timings[1.0] + (1 - shipped_replay_prob) * timings.get(0.0, 0.0)
        plays_mutants = runner.use_mutations and not runner.use_parallel_eval
        env_steps = rollout_steps * (1 + shipped_replay_prob * plays_mutants)
    else:
        shipped_replay_prob = None
        per_update, state = time_updates(runner, state, options.repeats)
        env_steps = rollout_steps
    print(
        json.dumps(
            {
                "algo": f"minimax:{options.config}",
                "num_envs": options.num_envs,
                "num_steps": options.num_steps,
                "num_seeds": 1,
                "compile_s": round(compile_s, 2),
                "steady_s_per_update": round(per_update, 4),
                "env_steps_per_update": env_steps,
                "env_steps_per_s": round(env_steps / per_update),
                "replay_prob": shipped_replay_prob,
                "s_per_update_by_replay_prob": {str(p): round(t, 4) for p, t in timings.items()},
                "device": str(jax.devices()[0].device_kind),
                "python": platform.python_version(),
                "versions": {name: metadata.version(name) for name in ("minimax-lib", "jax", "jaxlib", "flax")},
                "cpu_count": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
