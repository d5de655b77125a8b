"""The evaluate stage of benchmarks/learning/learning_vs_minimax.py: both sides' checkpoints on the grid of
`--checkpoint-every` rollouts, minimax's converted to cleanued's parameter tree, each evaluated with cleanued's
evaluator (`common/heldout_eval.py`) and appended to evaluations.jsonl.
"""

import json
import resource
import subprocess
import time
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np

from algos import dr
from benchmarks.learning.learning_vs_minimax_config import HELDOUT_STREAMS, REPO_ROOT, Args, cleanued_runs
from benchmarks.learning.learning_vs_minimax_outputs import (
    append_jsonl,
    cleanued_run_dir,
    minimax_archive,
    minimax_archive_ticks,
    minimax_dir,
    minimax_done,
    minimax_rollouts,
    minimax_seeds,
    read_jsonl,
    read_minimax_log,
)
from benchmarks.learning.learning_vs_minimax_run import job_environment
from benchmarks.learning.minimax_params import parameter_tree
from common import checkpoint as checkpoints
from common.errors import ConfigError
from common.evaluate import load_run
from common.heldout_eval import evaluate_policy, play_levels
from envs.heldout import get_heldout_maze
from envs.levels import sample_dr_level, shortest_path_length
from envs.maze import EnvParams


class Checkpoint(NamedTuple):
    side: str
    method: str
    seed: int  # index 0..N-1 on both sides (minimax's --seed is --first-seed + index + 1)
    grid: int  # the rollout count of the evaluation grid this checkpoint stands for
    rollouts: int  # rollouts the run had played at this checkpoint
    path: Path
    in_file: int = 0  # cleanued: the seed's position in the file's seed axis


def evaluation_grid(args: Args) -> list[int]:
    return list(range(args.checkpoint_every, args.rollouts + 1, args.checkpoint_every))


def cleanued_checkpoints(args: Args, method: str) -> list[Checkpoint]:
    found = []
    for run in cleanued_runs(args, method):
        archive = cleanued_run_dir(args.out, run.name) / "checkpoints" / "archive"
        for grid in evaluation_grid(args):
            path = checkpoints.checkpoint_path(archive, grid)
            if path.exists():
                found += [
                    Checkpoint("cleanued", method, seed, grid, grid, path, in_file)
                    for in_file, seed in enumerate(run.seeds)
                ]
    return found


def minimax_grid_ticks(rows: list[dict], method: str, grid: list[int], last_tick: int, archive_ticks: int) -> dict:
    """{grid rollouts: (tick, rollouts)}: for each grid point the archived tick whose rollout count is nearest
    (the last grid point is the stop tick itself)."""
    archived = [
        (int(row["_tick"]), minimax_rollouts(method, int(row["_tick"]), int(row["n_updates"])))
        for row in rows
        if int(row["_tick"]) % archive_ticks == 0 and int(row["_tick"]) <= last_tick
    ]
    chosen = {}
    for point in grid:
        if point == grid[-1]:
            chosen[point] = next((tick, played) for tick, played in archived if tick == last_tick)
        else:
            chosen[point] = min(archived, key=lambda item, point=point: (abs(item[1] - point), item[0]))
    return chosen


def minimax_checkpoints(args: Args, method: str) -> list[Checkpoint]:
    found = []
    for index, seed in enumerate(minimax_seeds(args)):
        directory = minimax_dir(args.out, method, seed)
        if not minimax_done(args, method, seed):
            continue
        stopped = json.loads((directory / "stopped.json").read_text())
        rows = read_minimax_log(directory / "logs.csv")
        grid = evaluation_grid(args)
        for point, (tick, played) in minimax_grid_ticks(
            rows, method, grid, stopped["stop_tick"], minimax_archive_ticks(args, method)
        ).items():
            path = directory / "params" / f"tick_{tick:08d}.npz"
            found.append(Checkpoint("minimax", method, index, point, played, path))
    return found


def convert_minimax_checkpoints(args: Args, found: list[Checkpoint]) -> None:
    """Convert the archives the evaluation needs (those not converted yet) in one minimax process."""
    pairs = []
    for item in {checkpoint.path for checkpoint in found if checkpoint.side == "minimax"}:
        if not item.exists():
            tick = int(item.stem.removeprefix("tick_"))
            pairs += [str(minimax_archive(item.parents[1], tick)), str(item)]
    if not pairs:
        return
    worker = [
        str(args.minimax_venv / "bin" / "python"),
        str(REPO_ROOT / "benchmarks" / "learning" / "minimax_checkpoint_params.py"),
    ]
    print(f"evaluate: converting {len(pairs) // 2} minimax checkpoints", flush=True)
    subprocess.run([*worker, "convert", *pairs], check=True, env=job_environment("minimax"), stdout=subprocess.DEVNULL)


class Evaluator:
    """cleanued's evaluation of one student's parameters, jitted once for all checkpoints of both sides; the `_seeds`
    methods play a stack of seeds' parameters in one vmapped call, each seed with the draws it gets alone."""

    def __init__(self, args: Args):
        self.args = args
        self.lstm_size = args.lstm_size
        self.network = dr.ActorCritic()
        size, walls, max_steps = args.maze_size, args.n_walls, args.max_steps
        self.env_params = EnvParams(max_steps=max_steps)
        rng_levels = jax.random.fold_in(jax.random.key(args.eval_seed), 0)
        sample = lambda rng: sample_dr_level(rng, size, size, walls)  # noqa: E731
        self.levels = jax.jit(jax.vmap(sample))(jax.random.split(rng_levels, args.train_levels))
        self.solvable_share = float(np.mean(np.asarray(jax.jit(jax.vmap(shortest_path_length))(self.levels)) >= 0))
        carry = dr.initial_carry(args.train_levels, self.lstm_size)

        def train_levels(params, grid, seed):
            rng = jax.random.fold_in(jax.random.fold_in(jax.random.key(args.eval_seed + 1), grid), seed)
            return play_levels(rng, self.network.apply, params, carry, self.levels, self.env_params, max_steps).returns

        self._train_levels = jax.jit(train_levels)
        self._train_levels_seeds = jax.jit(jax.vmap(train_levels, (0, None, 0)))
        self._heldout = {}

    def training_levels(self, params, grid: int, seed: int) -> np.ndarray:
        return np.asarray(self._train_levels(params, grid, seed))

    def training_levels_seeds(self, params, grid: int, seeds) -> np.ndarray:
        """[seeds, levels]: `training_levels` of each seed's parameters (leading axis of `params`) in one call."""
        return np.asarray(self._train_levels_seeds(params, grid, np.asarray(seeds)))

    def _heldout_functions(self, maze_name: str):
        if maze_name not in self._heldout:
            maze, episodes = get_heldout_maze(maze_name), self.args.heldout_episodes
            carry = dr.initial_carry(episodes, self.lstm_size)
            # One stream per maze and seed, the same at every checkpoint and on both sides: common random numbers,
            # so differences between checkpoints and sides are the policies', not the draws'.
            stream = jax.random.fold_in(jax.random.key(self.args.eval_seed + 2), HELDOUT_STREAMS.index(maze_name))

            def heldout(params, seed):
                rng = jax.random.fold_in(stream, seed)
                return evaluate_policy(rng, self.network.apply, params, carry, maze, self.env_params, episodes).returns

            self._heldout[maze_name] = jax.jit(heldout), jax.jit(jax.vmap(heldout))
        return self._heldout[maze_name]

    def heldout(self, params, maze_name: str, seed: int) -> np.ndarray:
        return np.asarray(self._heldout_functions(maze_name)[0](params, seed))

    def heldout_seeds(self, params, maze_name: str, seeds) -> np.ndarray:
        """[seeds, episodes]: `heldout` of each seed's parameters (leading axis of `params`) in one call."""
        return np.asarray(self._heldout_functions(maze_name)[1](params, np.asarray(seeds)))


def evaluation_key(record: dict) -> tuple:
    return tuple(record[key] for key in ("side", "method", "seed", "grid", "kind", "maze", "episodes", "eval_seed"))


def evaluations_needed(args: Args, checkpoint: Checkpoint) -> list[tuple[str, str | None, int]]:
    """(kind, maze, episodes) evaluated at `checkpoint`."""
    needed = [("train_levels", None, args.train_levels)]
    if checkpoint.grid >= args.heldout_start:
        needed += [("heldout", maze, args.heldout_episodes) for maze in args.heldout_mazes]
    return needed


class ParameterSource:
    """Student parameters per checkpoint, loading each file once (a cleanued archive holds every seed)."""

    def __init__(self):
        self.cleanued_runs = {}  # run folder -> (its make_train functions, a runner state as the template to load into)
        self.loaded = {}  # path -> (params [seeds, ...] or one student's, student updates per seed or one)

    def get(self, checkpoint: Checkpoint):
        if checkpoint.path not in self.loaded:
            self.loaded = {checkpoint.path: self._load(checkpoint)}  # one file at a time: memory stays flat
        params, updates = self.loaded[checkpoint.path]
        if checkpoint.side == "cleanued":
            return jax.tree.map(lambda x: x[checkpoint.in_file], params), int(updates[checkpoint.in_file])
        return params, int(updates)

    def _load(self, checkpoint: Checkpoint):
        if checkpoint.side == "minimax":
            with np.load(checkpoint.path) as data:
                flat = {key: data[key] for key in data.files}
            return parameter_tree(flat), int(flat["n_updates"])
        run_dir = checkpoint.path.parents[2]
        if run_dir not in self.cleanued_runs:  # the script's functions and a runner to shape the rest
            loaded = load_run(run_dir, checkpoint.path)
            self.cleanued_runs[run_dir] = (loaded.functions, loaded.runner)
        functions, template = self.cleanued_runs[run_dir]
        runner, _, _ = checkpoints.load(checkpoint.path, template)
        return functions.policies["student"](runner), np.asarray(functions.student_updates(runner))


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (the minimax conversion worker)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def evaluate_stage(args: Args) -> None:
    path = args.out / "evaluations.jsonl"
    done = {evaluation_key(record) for record in read_jsonl(path)}
    evaluator, source, structure = None, ParameterSource(), None
    started, cpu_started = time.time(), cpu_seconds()
    count = 0
    for method in args.methods:
        found = cleanued_checkpoints(args, method) + minimax_checkpoints(args, method)
        todo = [
            (checkpoint, kind, maze, episodes)
            for checkpoint in found
            for kind, maze, episodes in evaluations_needed(args, checkpoint)
            if (checkpoint.side, method, checkpoint.seed, checkpoint.grid, kind, maze, episodes, args.eval_seed)
            not in done
        ]
        if not todo:
            continue
        convert_minimax_checkpoints(args, [checkpoint for checkpoint, *_ in todo])
        evaluator = evaluator or Evaluator(args)
        print(f"evaluate {method}: {len(todo)} evaluations of {len({c for c, *_ in todo})} checkpoints", flush=True)
        for checkpoint, kind, maze, episodes in todo:
            params, student_updates = source.get(checkpoint)
            if structure is None:
                structure = jax.tree.structure(params)
            elif jax.tree.structure(params) != structure:  # the name mapping and cleanued's network disagree
                raise ConfigError(f"{checkpoint.path}: its parameter tree does not match cleanued's ActorCritic")
            if kind == "train_levels":
                returns = evaluator.training_levels(params, checkpoint.grid, checkpoint.seed)
            else:
                returns = evaluator.heldout(params, maze, checkpoint.seed)
            record = {"side": checkpoint.side, "method": method, "seed": checkpoint.seed, "grid": checkpoint.grid}
            record |= {"rollouts": checkpoint.rollouts, "student_updates": student_updates, "kind": kind, "maze": maze}
            record |= {"episodes": episodes, "eval_seed": args.eval_seed}
            record |= {"solve_rate": float(np.mean(returns > 0)), "return": float(np.mean(returns))}
            record |= {"checkpoint": str(checkpoint.path.relative_to(args.out))}
            if kind == "train_levels":
                record["solvable_share"] = evaluator.solvable_share
            append_jsonl(path, record)
            count += 1
    cpu_s, wall_s = cpu_seconds() - cpu_started, time.time() - started
    print(f"evaluate: {count} evaluations in {wall_s:.0f} s wall, {cpu_s:.0f} s CPU", flush=True)
    if count:
        append_jsonl(
            args.out / "jobs.jsonl",
            {"job": "evaluate", "evaluations": count, "wall_s": round(wall_s, 1), "cpu_s": round(cpu_s, 1)},
        )
