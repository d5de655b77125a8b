"""Time one JaxUED training script (examples/maze_{dr,plr,paired}.py of a DramaCow/jaxued checkout) at our benchmark
protocol; run by `bench_jaxued.py` with the Python of the JaxUED virtual environment (the jaxued 0.0.1 wheel and its
pinned stack) or by `gpu_suite.py` with its own (the project's jax, with `jax.tree_map` aliased for the wheel), never
imported by our code except for the pure helpers at the top.

The script runs unmodified: its own command line builds the config (`--method accel` is maze_plr.py
`--use_accel`), then its `main` runs until it first calls its jitted `train_and_eval_step`. That call is caught
and never made; the worker takes the runner state it was given and the script's own `train_step` (a closure of
`train_and_eval_step`) and jits `--updates-per-call` of them in one `lax.scan`, so evaluation, rendering, logging
and checkpoints stay out of the timing. `wandb` is replaced by a stand-in that records nothing (the examples need
it only to log), and checkpoints are off (`--checkpoint_save_interval 0`).

Timing, as minimax_worker.py does it: the compile of the chunk is timed apart. Where the state after the first call has
other types than the script's initial state (maze_plr.py's does: its train state starts from Python values), a jitted
run compiles again, so the worker compiles a second time for the new types; both are reported and `compile_s` is their
sum (the cost a run pays). PLR and ACCEL then get a full level buffer (random levels of the script's own generator,
random scores and timestamps), so the warm-up before replay starts (half of 4000 slots) is excluded. At one seed their
`lax.switch` runs one branch per update: new levels (a rollout; Robust PLR computes the PPO pass and drops it), replay
(rollout and PPO), and for ACCEL a mutation update after every replay (rollout of the mutants). The worker times updates
with the replay probability forced to 1 and to 0 and mixes them at the configured probability
(`mixed_seconds_per_update`). Every update of every branch rolls out `num_train_envs x num_steps` env steps (PAIRED:
both students'), so env steps/s compare with ours and minimax's. Each timing runs one warm-up call and reports the
median of `--repeats` calls after `block_until_ready`. Prints one JSON line.

    <jaxued venv>/bin/python benchmarks/peers/jaxued_worker.py --repo /path/to/jaxued --method plr
"""

import argparse
import ast
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
import types
from importlib import metadata
from pathlib import Path

METHODS = {
    "dr": ("maze_dr.py", ["--n_walls", "60"]),
    "plr": ("maze_plr.py", ["--n_walls", "60", "--replay_prob", "0.5"]),
    "accel": ("maze_plr.py", ["--use_accel", "--n_walls", "0", "--num_edits", "20", "--replay_prob", "0.8"]),
    "paired": ("maze_paired.py", []),
}
"""Method -> JaxUED example script and the flags that set the papers' configuration where its defaults differ (the
examples default to 25 walls, Robust PLR / ACCEL replay probability 0.8 and 5 edits; ours and minimax's follow the
papers: 60 walls for DR and PLR, ACCEL from empty mazes with 20 edits, replay probability 0.5 for Robust PLR and
0.8 for ACCEL). Everything else is the script's default: 32 envs x 256 steps, LSTM-256, 5 PPO epochs, 1 minibatch,
a 4000-level buffer, PAIRED's 50-step adversary with a 128-filter conv."""


def mixed_seconds_per_update(replay_prob: float, s_replay: float, s_new: float, mutates_after_replay: bool) -> float:
    """Expected seconds per update at `replay_prob` from per-update times measured with the decision forced.

    PLR: each update replays with probability p, so p * s_replay + (1 - p) * s_new. ACCEL: a replay update is always
    followed by a mutation update, so forcing p = 1 alternates them and `s_replay` is the mean of the pair; per
    decision there are 1 + p updates, (p * 2 * s_replay + (1 - p) * s_new) / (1 + p) seconds each."""
    if mutates_after_replay:
        return (replay_prob * 2 * s_replay + (1 - replay_prob) * s_new) / (1 + replay_prob)
    return replay_prob * s_replay + (1 - replay_prob) * s_new


def alias_tree_map(jax) -> None:
    """jaxued 0.0.1 (the wheel) calls `jax.tree_map`, which jax removed after 0.4; the GPU suite runs the workers on
    the project's jax."""
    if not hasattr(jax, "tree_map"):
        jax.tree_map = jax.tree_util.tree_map


class _Captured(Exception):
    """Raised in place of the script's first `train_and_eval_step` call; carries the function and its state."""

    def __init__(self, function, runner_state):
        super().__init__("captured train_and_eval_step")
        self.function, self.runner_state = function, runner_state


def _closure(function) -> dict:
    return dict(
        zip(function.__code__.co_freevars, (cell.cell_contents for cell in function.__closure__ or ()), strict=True)
    )


def _fake_wandb() -> types.ModuleType:
    """The examples call wandb.init / define_metric / log and read wandb.config; nothing here is logged."""
    wandb = types.ModuleType("wandb")

    def init(config=None, **_):
        wandb.config = config

    wandb.init, wandb.define_metric, wandb.log = init, lambda *a, **k: None, lambda *a, **k: None
    wandb.Image = wandb.Video = lambda *a, **k: None
    return wandb


def capture(repo: Path, method: str, extra_flags: list[str]):
    """Run the example's CLI and `main` up to its first train_and_eval_step: (closure, runner_state, config)."""
    import jax

    alias_tree_map(jax)
    script, flags = METHODS[method]
    path = repo / "examples" / script
    sys.modules["wandb"] = _fake_wandb()
    spec = importlib.util.spec_from_file_location(f"jaxued_{method}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # The `if __name__ == "__main__":` block builds the config from argv; run it with `main` recording the config.
    tree = ast.parse(path.read_text())
    (block,) = [node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)]
    configs = []
    real_main = module.main
    module.main = lambda config, **_: configs.append(config)
    sys.argv = [str(path), *flags, "--checkpoint_save_interval", "0", *extra_flags]
    exec(compile(ast.Module(body=block.body, type_ignores=[]), str(path), "exec"), module.__dict__)
    (config,) = configs

    class JaxWithCapturingJit:
        def __getattr__(self, name):
            return getattr(jax, name)

        def jit(self, function=None, **kwargs):
            if function is not None and function.__name__ == "train_and_eval_step":

                def stand_in(runner_state, _):
                    raise _Captured(function, runner_state)

                return stand_in
            return jax.jit(function, **kwargs)

    module.jax = JaxWithCapturingJit()
    try:
        real_main(config, project="timing")
    except _Captured as captured:
        return _closure(captured.function), captured.runner_state, config
    raise RuntimeError(f"{script} never called train_and_eval_step")


def fill_buffer(runner_state, closure: dict):
    """The runner state with a full level buffer: random levels of the script's generator, random scores, ages."""
    import jax
    import jax.numpy as jnp

    rng, train_state = runner_state
    level_sampler = closure["level_sampler"]
    sample_random_level = _closure(closure["train_step"])["sample_random_level"]
    sampler = train_state.sampler
    capacity = level_sampler.capacity
    rng_levels, rng_scores, rng_ages = jax.random.split(jax.random.PRNGKey(1), 3)
    scores = jax.random.uniform(rng_scores, (capacity,))
    full = {
        **sampler,
        "levels": jax.vmap(sample_random_level)(jax.random.split(rng_levels, capacity)),
        "scores": scores,
        "timestamps": jax.random.randint(rng_ages, (capacity,), 0, capacity).astype(sampler["timestamps"].dtype),
        "size": jnp.asarray(capacity, dtype=jnp.asarray(sampler["size"]).dtype),
        "episode_count": jnp.asarray(capacity, dtype=jnp.asarray(sampler["episode_count"]).dtype),
    }
    if "levels_extra" in sampler:
        full["levels_extra"] = {"max_return": scores}
    return rng, train_state.replace(sampler=full)


def type_signature(tree) -> tuple:
    """What a compiled call is specialised to: the tree, and each leaf's shape, dtype and weak type (a Python int is
    weakly typed; the same value coming back from jit is not)."""
    import jax
    import jax.numpy as jnp

    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return treedef, [
        (jnp.shape(x), jnp.result_type(x), getattr(x, "weak_type", not hasattr(x, "dtype"))) for x in leaves
    ]


def compile_chunk(train_step, updates: int, runner_state):
    """(compiled chunk, seconds) for `updates` train steps in one scan, AOT-compiled for this state's types."""
    import jax

    chunk = jax.jit(lambda carry: jax.lax.scan(train_step, carry, None, updates)[0])
    started = time.perf_counter()
    compiled = chunk.lower(runner_state).compile()
    return compiled, time.perf_counter() - started


def time_chunk(compiled, runner_state, repeats: int):
    """Median seconds of one call after a warm-up call, and the state after the timed calls."""
    import jax

    runner_state = jax.block_until_ready(compiled(runner_state))
    durations = []
    for _ in range(repeats):
        started = time.perf_counter()
        runner_state = jax.block_until_ready(compiled(runner_state))
        durations.append(time.perf_counter() - started)
    return statistics.median(durations), runner_state


def branch_counts(train_state) -> dict:
    return {name: int(getattr(train_state, f"num_{name}_updates")) for name in ("dr", "replay", "mutation")}


def main() -> None:
    cli = argparse.ArgumentParser()
    cli.add_argument("--repo", type=Path, required=True, help="a checkout of github.com/DramaCow/jaxued")
    cli.add_argument("--method", choices=sorted(METHODS), required=True)
    cli.add_argument("--updates-per-call", type=int, default=2, help="even, so ACCEL's forced replays pair up")
    cli.add_argument("--repeats", type=int, default=3)
    cli.add_argument("--flags", nargs=argparse.REMAINDER, default=[], help="more flags for the example script")
    options = cli.parse_args()
    import jax

    closure, runner_state, config = capture(options.repo, options.method, options.flags)
    train_step, updates = closure["train_step"], options.updates_per_call
    first, first_s = compile_chunk(train_step, updates, runner_state)
    state_after = jax.block_until_ready(first(runner_state))
    same_types = type_signature(state_after) == type_signature(runner_state)
    compiled, second_s = (first, 0.0) if same_types else compile_chunk(train_step, updates, state_after)
    runner_state = state_after
    num_envs = config["num_train_envs"]
    num_steps = config["student_num_steps"] if options.method == "paired" else config["num_steps"]
    env_steps_per_update = num_envs * num_steps * (2 if options.method == "paired" else 1)
    timings, counts = {}, {}
    replay_prob = None
    if "level_sampler" in closure:
        level_sampler = closure["level_sampler"]
        replay_prob = level_sampler.replay_prob
        runner_state = fill_buffer(runner_state, closure)
        for forced in (1.0, 0.0):
            # The decision is read when train_step is traced, and scan caches the trace of the same function, so
            # each forced probability needs a fresh trace and compile.
            level_sampler.replay_prob = forced
            jax.clear_caches()
            forced_chunk, _ = compile_chunk(train_step, updates, runner_state)
            before = branch_counts(runner_state[1])
            seconds, runner_state = time_chunk(forced_chunk, runner_state, options.repeats)
            after = branch_counts(runner_state[1])
            timings[forced] = seconds / updates
            counts[forced] = {name: after[name] - before[name] for name in after}
        level_sampler.replay_prob = replay_prob
        per_update = mixed_seconds_per_update(replay_prob, timings[1.0], timings[0.0], config["use_accel"])
    else:
        seconds, runner_state = time_chunk(compiled, runner_state, options.repeats)
        per_update = seconds / updates
    print(
        json.dumps(
            {
                "algo": f"jaxued:{options.method}",
                "script": METHODS[options.method][0],
                "flags": METHODS[options.method][1] + options.flags,
                "num_envs": num_envs,
                "num_steps": num_steps,
                "num_seeds": 1,
                "updates_per_call": updates,
                "compile_s": round(first_s + second_s, 2),
                "compile_s_first_call": round(first_s, 2),
                "compile_s_second_call": round(second_s, 2),
                "steady_s_per_update": round(per_update, 4),
                "env_steps_per_update": env_steps_per_update,
                "env_steps_per_s": round(env_steps_per_update / per_update),
                "replay_prob": replay_prob,
                "s_per_update_by_replay_prob": {str(p): round(t, 4) for p, t in timings.items()},
                "branches_by_replay_prob": {str(p): c for p, c in counts.items()},
                "device": str(jax.devices()[0].device_kind),
                "python": platform.python_version(),
                "versions": {name: _version(name) for name in ("jaxued", "jax", "jaxlib", "flax")},
                "repo_commit": _repo_commit(options.repo),
                "config": {key: value for key, value in config.items() if isinstance(value, (int, float, str, bool))},
                "cpu_count": os.cpu_count(),
            }
        )
    )


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _repo_commit(repo: Path) -> str:
    import subprocess

    result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


if __name__ == "__main__":
    main()
