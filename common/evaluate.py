"""Evaluate a run folder (every seed) on named held-out mazes.

    python -m common.evaluate --run-dir runs/dr --mazes SixteenRooms Labyrinth PerfectMazeXL --episodes 100 --gif

Loads the newest checkpoint (or --checkpoint), rebuilds the script's `Config` and `ActorCritic` from the
`script` recorded in config.json (only scripts in algos/ are ever loaded) and evaluates the policy named by
--policy with `common.heldout_eval` (sampled actions, the first episode of each attempt counts). Writes a
CSV (one row per maze per seed) and prints, per maze,
the mean over seeds with a 95% Student-t confidence interval. `--gif` saves seed 0's first episode on each
maze as an animated GIF.
"""

import csv
import functools
import importlib.util
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import jax
import numpy as np
import tyro
from tyro.conf import arg

# SCAFFOLDING: the repo root on sys.path so `python common/evaluate.py` works like `python -m common.evaluate`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.checkpoint import list_checkpoints, load  # noqa: E402
from common.config import (  # noqa: E402
    AT_LEAST_ONE,
    Range,
    config_from_saved,
    raise_first,
    range_problems,
    read_saved_config,
    with_flags,
)
from common.errors import ConfigError  # noqa: E402
from common.heldout_eval import evaluate_policy  # noqa: E402
from common.provenance import REPO_ROOT  # noqa: E402
from common.runs import one_line_errors  # noqa: E402
from envs.heldout import HELDOUT_MAZES, get_heldout_maze  # noqa: E402
from envs.render import render_rollout, save_gif  # noqa: E402

T_CRITICAL_95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228]
"""Two-sided 95% Student-t quantiles for 1..10 degrees of freedom; 1.96 beyond 30, interpolated between."""
GIF_MAX_FRAMES = 600
GIF_MAX_PIXELS = 480


@dataclass(frozen=True)
class Args:
    run_dir: Path
    """Run folder made by an algos/ script (holds config.json and checkpoints/)."""
    mazes: tuple[str, ...] = ("SixteenRooms", "Labyrinth", "StandardMaze")
    """Held-out mazes to evaluate on."""
    episodes: Annotated[int, AT_LEAST_ONE] = 100
    """Episodes per maze per seed."""
    policy: str = "student"
    """Policy to evaluate: student (every method), or protagonist, antagonist, student<i> of a PAIRED run."""
    checkpoint: Annotated[Path | None, arg(help_behavior_hint="(default: the run's newest)")] = None
    """A specific checkpoint file."""
    seed: Annotated[int, Range(0, 2**32 - 1)] = 0
    """Evaluation seed."""
    out: Annotated[Path | None, arg(help_behavior_hint="(default: <run-dir>/eval/evaluate_<update>_<time>.csv)")] = None
    """CSV path."""
    gif: bool = False
    """Save seed 0's first episode on each maze as <run-dir>/eval/<maze>_update_<update>.gif."""

    def __post_init__(self):
        raise_first(range_problems(self))
        for name in self.mazes:
            if name not in HELDOUT_MAZES:
                raise ConfigError(f"unknown maze {name!r}; choose from {', '.join(HELDOUT_MAZES)}")


def t_critical_95(samples: int) -> float:
    degrees = samples - 1
    if degrees <= len(T_CRITICAL_95):
        return T_CRITICAL_95[degrees - 1]
    if degrees >= 30:
        return 1.96
    return float(np.interp(degrees, [10, 30], [T_CRITICAL_95[-1], 2.042]))


def mean_and_ci95(values) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (NaN for a single value)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) < 2:
        return float(values.mean()), float("nan")
    return float(values.mean()), t_critical_95(len(values)) * float(values.std(ddof=1)) / math.sqrt(len(values))


def load_script(script: str):
    """The algos/ module that made a run, imported from its file; nothing outside algos/ is ever run."""
    algos = (REPO_ROOT / "algos").resolve()
    path = (REPO_ROOT / script).resolve()
    if path.parent != algos or path.suffix != ".py" or path.name.startswith("_"):
        raise ConfigError(f"config.json names script {script!r}, which is not an algos/ script; refusing to run it")
    if not path.is_file():
        raise ConfigError(f"config.json names script {script!r}, which is not in this checkout")
    spec = importlib.util.spec_from_file_location(f"cleanued_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_run(run_dir: Path, checkpoint: Path | None):
    """(script module, its Config, restored runner state for all seeds, update)."""
    saved = read_saved_config(run_dir)
    module = load_script(saved["script"])
    config = with_flags(config_from_saved(module.Config, saved["config"], run_dir), resume=False)
    if checkpoint is None:
        found = list_checkpoints(run_dir / "checkpoints")
        if not found:
            raise ConfigError(f"{run_dir} has no checkpoints yet")
        checkpoint = found[-1]
    functions = module.make_train(config)
    rngs = jax.random.split(jax.random.key(config.run.seed), config.run.num_seeds)
    runner, update, _ = load(checkpoint, jax.eval_shape(functions.init, rngs))
    return module, config, runner, update


def main(args: Args) -> None:
    module, config, runner, update = load_run(args.run_dir, args.checkpoint)
    policies = module.policies(config)
    if args.policy not in policies:
        raise ConfigError(
            f"unknown --policy {args.policy!r} for this {module.__name__[9:]} run; choose from {', '.join(policies)}"
        )
    params = policies[args.policy](runner)
    network = module.ActorCritic()
    num_seeds, lstm_size = config.run.num_seeds, config.ppo.lstm_size
    out = args.out or args.run_dir / "eval" / f"evaluate_{update:08d}_{time.strftime('%Y%m%d-%H%M%S')}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"{args.run_dir} at update {update}, policy {args.policy}, {num_seeds} seeds x {args.episodes} episodes")
    for index, name in enumerate(args.mazes):
        maze = get_heldout_maze(name)

        def evaluate_seed(rng, seed_params, maze=maze, num_episodes=args.episodes):
            carry = module.initial_carry(num_episodes, lstm_size)
            return evaluate_policy(rng, network.apply, seed_params, carry, maze, config.env_params, num_episodes)

        rngs = jax.random.split(jax.random.fold_in(jax.random.key(args.seed), index), num_seeds)
        returns = np.asarray(jax.jit(jax.vmap(lambda rng, p: evaluate_seed(rng, p).returns))(rngs, params))
        solve_rates, mean_returns = (returns > 0).mean(axis=1), returns.mean(axis=1)
        for seed in range(num_seeds):
            rows.append({"maze": name, "seed": seed, "update": update, "episodes": args.episodes,
                         "solve_rate": float(solve_rates[seed]), "return": float(mean_returns[seed])})  # fmt: skip
        (solve, solve_ci), (ret, ret_ci) = mean_and_ci95(solve_rates), mean_and_ci95(mean_returns)
        print(
            f"{name:>18}: solve rate {solve:.3f} ± {solve_ci:.3f}   return {ret:.3f} ± {ret_ci:.3f}   (95% CI, seeds)"
        )
        if args.gif:
            first_seed = jax.tree.map(lambda x: x[0], params)
            result = jax.jit(functools.partial(evaluate_seed, num_episodes=1))(rngs[0], first_seed)
            level = jax.tree.map(lambda x: np.asarray(x[0]), result.levels)
            positions, directions = np.asarray(result.agent_pos[:, 0]), np.asarray(result.agent_dir[:, 0])
            steps = min(int(result.episode_length[0]), GIF_MAX_FRAMES - 1)
            positions = np.concatenate([[level.agent_pos], positions[:steps]])
            tile_size = max(3, min(16, GIF_MAX_PIXELS // (maze.width + 2)))
            frames = render_rollout(
                level, positions, np.concatenate([[level.agent_dir], directions[:steps]]), tile_size
            )
            gif = save_gif(frames, args.run_dir / "eval" / f"{name}_update_{update:08d}.gif")
            print(f"{'':>18}  {gif} ({steps} steps)")
    with open(out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out}")


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Args))
