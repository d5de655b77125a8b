"""Time one minimax-lib 0.2.0 method at our benchmark protocol; run by bench_algos.py --minimax with the
Python of the minimax virtual environment (its pinned JAX 0.4.31 stack), never imported by our code.

Builds minimax's ExperimentRunner from the shipped maze config (minimax/config/configs/maze/<name>.json)
with the same envs and steps, times the compile of one jitted update (`lower().compile()`), runs it, runs
once more to warm up, then times `--repeats` calls after `block_until_ready` and prints one JSON line.

    <minimax venv>/bin/python benchmarks/minimax_worker.py --config dr --num-envs 32 --num-steps 256
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
import minimax
from minimax.arguments import parser as minimax_parser
from minimax.runners import ExperimentRunner


def shipped_flags(name: str, overrides: dict) -> list[str]:
    path = Path(minimax.__file__).parent / "config" / "configs" / "maze" / f"{name}.json"
    params = {key: values[0] for key, values in json.loads(path.read_text())["args"].items()}
    params.update(overrides)
    return [f"--{key}={value}" for key, value in params.items() if value is not None]


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
    runner = ExperimentRunner(
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
    run = jax.jit(lambda state: runner.runner.run(*state))
    reset_state = runner.runner.reset(jax.random.PRNGKey(0))
    started = time.perf_counter()
    first_step = run.lower(reset_state).compile()
    compile_s = time.perf_counter() - started
    # PLR runners return one more state entry (the level buffer) than reset gives; later updates need the
    # executable for that state (a cache hit for the other runners).
    state = tuple(jax.block_until_ready(first_step(reset_state))[1:])
    step = run.lower(state).compile()
    state = tuple(jax.block_until_ready(step(state))[1:])
    durations = []
    for _ in range(options.repeats):
        started = time.perf_counter()
        state = tuple(jax.block_until_ready(step(state))[1:])
        durations.append(time.perf_counter() - started)
    per_update = statistics.median(durations)
    env_steps = runner.runner.step_batch_size * runner.runner.n_rollout_steps // runner.runner.n_students
    print(
        json.dumps(
            {
                "algo": f"minimax:{options.config}",
                "num_envs": options.num_envs,
                "num_steps": options.num_steps,
                "num_seeds": 1,
                "compile_s": round(compile_s, 2),
                "steady_s_per_update": round(per_update, 4),
                "env_steps_per_s": round(env_steps / per_update),
                "device": str(jax.devices()[0].device_kind),
                "python": platform.python_version(),
                "versions": {name: metadata.version(name) for name in ("minimax-lib", "jax", "jaxlib", "flax")},
                "cpu_count": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
