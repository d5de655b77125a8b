"""Evaluate a run folder (every seed) on named held-out mazes, and on the risk evaluation of SFL.

    python -m common.evaluate --run-dir runs/dr --mazes SixteenRooms Labyrinth PerfectMazeXL --episodes 100 --gif
    python -m common.evaluate --run-dir runs/dr --mazes --risk   # only the risk evaluation

Loads the newest checkpoint (or --checkpoint), rebuilds the script's `Config` and `ActorCritic` from the
`script` recorded in config.json (only scripts in algos/ are ever loaded) and evaluates the policy named by
--policy with `common.heldout_eval` (sampled actions, the first episode of each attempt counts). A folder that
is still training may prune the newest checkpoint while it is being read; the then newest one is read instead.
Writes a CSV (one row per maze per seed) and prints, per maze, the mean over seeds with its interval under the
policy `python -m common.report` shares (`common.report.mean_and_interval`: 95% Student-t, clipped to [0, 1],
none below 3 seeds). `--gif` saves seed 0's first episode on each maze as an animated GIF, cropped around the
agent on big mazes.

`--risk` adds the adversarial evaluation of Rutherford et al., 2024 ("No Regrets", SFL): sample --risk-levels
solvable mazes of --risk-maze-size with --risk-walls walls, play --risk-episodes attempts of --risk-max-steps
steps on each (the authors' 13x13, 60 walls, 250 steps by default, whatever the run trained on), twice with
independent randomness; a level's win rate is its successes over its episodes, counted as the authors count them
(`--risk-counting window`: every episode an attempt ends in its steps, the level restarted after each, so a level
solved fast counts many successes) or each attempt's first episode (`first`, the held-out mazes' count); for each
alpha in RISK_ALPHAS (percent), rank the levels by the first pass's win rate, take the worst alpha percent and
report the second pass's mean win rate on them, so the selection does not bias the estimate (CVaR of the win
rate). Written to <run-dir>/eval/risk_<update>_<time>.csv
(a row per seed per alpha, with the maze size, walls and step limit played), which `python -m common.report`
reads.
"""

import csv
import functools
import importlib.util
import io
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import tyro
from tyro.conf import arg

# SCAFFOLDING: the repo root on sys.path so `python common/evaluate.py` works like `python -m common.evaluate`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.checkpoint import list_checkpoints, load, write_atomic  # noqa: E402
from common.config import (  # noqa: E402
    AT_LEAST_ONE,
    NON_NEGATIVE,
    Range,
    absent_folder_problem,
    config_differences,
    config_from_saved,
    out_path_problem,
    raise_first,
    range_problems,
    read_saved_config,
    resumable_fields,
    with_flags,
)
from common.contract import BatchedOverSeeds  # noqa: E402
from common.devices import scan_unroll  # noqa: E402
from common.errors import ConfigError  # noqa: E402
from common.heldout_eval import evaluate_policy, play_levels, play_levels_restarting  # noqa: E402
from common.provenance import REPO_ROOT  # noqa: E402
from common.report import MIN_SEEDS_FOR_INTERVAL, RiskSetup, interval_policy, mean_and_interval  # noqa: E402
from common.runs import one_line_errors  # noqa: E402
from common.sweep import parse_sweep, run_functions  # noqa: E402
from envs.heldout import HELDOUT_MAZES, get_heldout_maze  # noqa: E402
from envs.levels import sample_dr_level, shortest_path_length  # noqa: E402
from envs.render import MIN_CELL_PIXELS, render_rollout, save_gif  # noqa: E402

RISK_ALPHAS = (0.01, 0.1, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
"""The worst fractions of levels (percent) the risk evaluation reports: SFL's for its maze
(sfl/deploy/eval_minigrid_2_analyse.py: 1, 2, 5, 10, 20, 50, 100, with 0.1 and 0.01 first)."""
PRUNED_RETRIES = 5
"""Times the newest checkpoint is looked up again when the training process prunes it before it is read."""
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
    """CSV path; refused if it exists."""
    gif: bool = False
    """Save seed 0's first episode on each maze as <run-dir>/eval/<maze>_update_<update>.gif."""
    risk: bool = False
    """Also run the risk evaluation (CVaR of the win rate over sampled training mazes, SFL)."""
    risk_levels: Annotated[int, AT_LEAST_ONE] = 10_000
    """Solvable mazes sampled for the risk evaluation (SFL: 10,000)."""
    risk_episodes: Annotated[int, AT_LEAST_ONE] = 10
    """Attempts per maze and pass in the risk evaluation (SFL: 10)."""
    risk_maze_size: Annotated[int, Range(2, 101)] = 13
    """Interior size of the risk evaluation's mazes (SFL: 13)."""
    risk_walls: Annotated[int, NON_NEGATIVE] = 60
    """Walls drawn with replacement per risk-evaluation maze (SFL: 60)."""
    risk_max_steps: Annotated[int, AT_LEAST_ONE] = 250
    """Steps per risk-evaluation attempt (SFL: 250, its maze's episode limit), whatever the run trained with."""
    risk_counting: Literal["window", "first"] = "window"
    """Episodes a risk attempt counts: every one ended in its steps, the level restarted (SFL's), or its first."""
    batch: Annotated[int, AT_LEAST_ONE] = 4096
    """Attempts played per jitted call of the risk evaluation (memory against calls)."""

    def __post_init__(self):
        raise_first(range_problems(self))
        if self.risk_walls > self.risk_maze_size**2 - 2:
            raise ConfigError(f"--risk-walls ({self.risk_walls}) must leave two cells free for the agent and goal")
        if not self.mazes and not self.risk:
            raise ConfigError("nothing to evaluate: give --mazes, --risk or both")
        problem, taken = out_path_problem(self.out) if self.out is not None else ("", False)
        if problem:
            raise ConfigError(f"--out {self.out}: {problem}")
        if taken:
            kind = "a folder" if self.out.is_dir() else "there"
            raise ConfigError(f"--out {self.out} is {kind} already; give a new file path (nothing is overwritten)")
        for name in self.mazes:
            if name not in HELDOUT_MAZES:
                raise ConfigError(f"unknown maze {name!r}; choose from {', '.join(HELDOUT_MAZES)}")


def describe(values) -> str:
    """'0.860 [0.712, 1.000]' (the mean over seeds and its 95% interval, as the report gives it), or just the mean
    when there are too few seeds for an interval."""
    mean, interval = mean_and_interval(values)
    return f"{mean:.3f}" if interval is None else f"{mean:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


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


class LoadedRun(NamedTuple):
    module: object  # the algos/ script that trained the run
    config: object  # its Config, as saved
    functions: BatchedOverSeeds  # what its make_train(config) returns (the policies it holds)
    runner: object  # restored runner state, leaves [num_seeds, ...]
    update: int
    identity: tuple[int, int]  # its config.json's inode and modification time: a new run in the folder changes them


def run_identity(run_dir: Path) -> tuple[int, int] | None:
    """What tells this run from another started in the same folder later (`--overwrite` writes a new config.json,
    a new file), or None when the folder has no config.json any more."""
    try:
        status = (run_dir / "config.json").stat()
    except FileNotFoundError:
        return None
    return status.st_ino, status.st_mtime_ns


def check_same_run(run_dir: Path, identity: tuple[int, int]) -> None:
    """Refuse to write results into `run_dir` once another run has replaced the evaluated one there."""
    if run_identity(run_dir) != identity:
        raise ConfigError(
            f"{run_dir} was overwritten or deleted while its run was evaluated: nothing more is written there"
        )


def load_run(run_dir: Path, checkpoint: Path | None) -> LoadedRun:
    """The run's script, config, functions and restored runner state (`checkpoint`, else the newest)."""
    problem = absent_folder_problem(run_dir)
    if problem:
        raise ConfigError(f"cannot evaluate {run_dir}: {problem}")
    identity = run_identity(run_dir)
    saved = read_saved_config(run_dir)
    module = load_script(saved["script"])
    # Evaluation runs here, one process, whatever devices the run trained on (checkpoints hold host arrays).
    config = with_flags(
        config_from_saved(module.Config, saved["config"], run_dir),
        resume=False,
        init_from=None,  # the checkpoint holds the parameters
        num_devices=None,
        shard_envs=False,
        coordinator_address=None,
        num_processes=1,
        process_id=None,
    )
    if checkpoint is not None and not checkpoint.is_file():
        raise ConfigError(f"--checkpoint {checkpoint} does not exist")
    rngs = jax.random.split(jax.random.key(config.run.seed), config.run.num_seeds)
    functions = run_functions(config, module.make_train, saved["script"])
    template = jax.eval_shape(functions.init, rngs)
    if checkpoint is not None:
        runner, update, saved_with = load(checkpoint, template)
        differing = config_differences(saved["config"], saved_with, resumable_fields(config.schedule_spans_run))
        if differing:  # another run's checkpoint: its results would be credited to this run
            raise ConfigError(
                f"--checkpoint {checkpoint} was saved by another experiment than {run_dir}'s: it differs in "
                f"{'; '.join(differing)}; give one of this run's checkpoints"
            )
    else:
        runner, update = load_newest(run_dir, template)
    if run_identity(run_dir) != identity:  # a new run started between reading config.json and the checkpoint
        raise ConfigError(f"{run_dir} was overwritten while it was being loaded; evaluate it again")
    return LoadedRun(module, config, functions, runner, update, identity)


def load_newest(run_dir: Path, template) -> tuple[object, int]:
    """(runner state, update) of the run's newest checkpoint. While a run trains, each save prunes the oldest
    checkpoints, so the newest found may be gone when it is opened; the newest is then looked up again (a newer
    one has replaced it). Once opened, a file is read whole, so a later prune cannot tear it."""
    for _ in range(PRUNED_RETRIES):
        found = list_checkpoints(run_dir / "checkpoints")
        if not found:
            raise ConfigError(f"{run_dir} has no checkpoints yet")
        try:
            runner, update, _ = load(found[-1], template)
            return runner, update
        except FileNotFoundError:
            continue
    raise ConfigError(
        f"{run_dir}: the newest checkpoint was pruned before it could be read, {PRUNED_RETRIES} times; "
        "give one from checkpoints/archive/ with --checkpoint"
    )


def check_writable(folder: Path, what: str) -> None:
    """A one-line error unless a file can be made in `folder` (made if missing), which will hold `what`."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise ConfigError(f"cannot write to {folder} ({error.strerror or error}): it would hold {what}") from None


def seed_keys(rng, config) -> jax.Array:
    """One evaluation key per seed, the same for every point of a sweep (its points meet the same levels and draws)."""
    keys = jax.random.split(rng, config.run.num_seeds)
    sweep = parse_sweep(config.run.sweep, config.run.sweep_zip)
    if sweep is None:
        return keys
    return jax.random.wrap_key_data(jnp.tile(jax.random.key_data(keys), (len(sweep.points), 1)))


def entry_fields(entry: int, sweep, num_seeds: int) -> dict:
    """The CSV row's columns naming an entry: its seed, and in a sweep its point first."""
    if sweep is None:
        return {"seed": entry}
    return {"point": entry // num_seeds, "seed": entry % num_seeds}


def point_labels(sweep) -> list[tuple[int, str]]:
    """(point, the text after its printed line) for each point of a sweep; one unlabelled group without one."""
    if sweep is None:
        return [(0, "")]
    return [(point, f"   (point {point}: {sweep.label(point)})") for point in range(len(sweep.points))]


def write_csv(path: Path, rows: list[dict]) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(path, buffer.getvalue().encode())


def cvar(first_pass: np.ndarray, second_pass: np.ndarray, alpha: float) -> float:
    """Mean second-pass win rate of the worst `alpha` percent of levels by first-pass win rate (at least one
    level; ties keep level order)."""
    count = max(1, math.ceil(alpha / 100 * len(first_pass)))
    worst = np.argsort(first_pass, kind="stable")[:count]
    return float(second_pass[worst].mean())


def sample_solvable_levels(rng, count: int, size: int, walls: int):
    """`count` DR levels (size x size, `walls` walls with replacement) that a BFS finds solvable."""
    sample = jax.jit(
        lambda key, n: jax.vmap(lambda k: sample_dr_level(k, size, size, walls))(jax.random.split(key, n)),
        static_argnums=1,
    )
    solvable = jax.jit(jax.vmap(lambda level: shortest_path_length(level) >= 0))
    kept, round_index = [], 0
    while sum(len(batch.wall_map) for batch in kept) < count:
        batch = sample(jax.random.fold_in(rng, round_index), count)
        keep = np.asarray(solvable(batch))
        kept.append(jax.tree.map(lambda x, keep=keep: np.asarray(x)[keep], batch))
        round_index += 1
    return jax.tree.map(lambda *parts: np.concatenate(parts)[:count], *kept)


def risk_win_rates(args: Args, rng, module, network, params, config, levels) -> np.ndarray:
    """[2 passes, entries, levels] win rates: each level attempted --risk-episodes times per pass, its successes
    over its episodes (as --risk-counting counts them)."""
    attempts = jax.tree.map(lambda x: np.repeat(x, args.risk_episodes, axis=0), levels)  # [levels * episodes]
    total, lstm_size = attempts.wall_map.shape[0], config.ppo.lstm_size
    env_params = config.env_params.replace(max_steps=args.risk_max_steps)  # the evaluation's limit, not the run's
    unroll = scan_unroll(config.run.devices)

    @jax.jit
    def play(rngs, seed_params, chunk):
        carry = module.initial_carry(chunk.wall_map.shape[0], lstm_size)

        def counts(key, p):  # (successes, episodes) of each attempt
            if args.risk_counting == "window":
                return play_levels_restarting(
                    key, network.apply, p, carry, chunk, env_params, args.risk_max_steps, unroll
                )
            wins = play_levels(key, network.apply, p, carry, chunk, env_params, args.risk_max_steps, unroll).returns > 0
            return wins.astype(jnp.int32), jnp.ones_like(wins, jnp.int32)

        return jnp.stack(jax.vmap(counts)(rngs, seed_params))  # [2, entries, attempts]

    passes, started, interactive = [], time.perf_counter(), sys.stderr.isatty()
    entries = jax.tree.leaves(params)[0].shape[0]
    for pass_index in range(2):
        counted = []
        for start in range(0, total, args.batch):
            chunk = jax.tree.map(lambda x, s=start: x[s : s + args.batch], attempts)
            keys = seed_keys(jax.random.fold_in(rng, pass_index * total + start), config)
            counted.append(np.asarray(play(keys, params, chunk)))
            done = pass_index * total + start + len(chunk.wall_map)
            progress = f"risk evaluation: {done}/{2 * total} attempts, {time.perf_counter() - started:.0f}s"
            if interactive:
                print(f"\r{progress}", end="", file=sys.stderr, flush=True)
        if not interactive:  # a log file gets one whole line per pass, not carriage returns
            print(progress, file=sys.stderr, flush=True)
        successes, episodes = np.concatenate(counted, axis=2).reshape(2, entries, -1, args.risk_episodes).sum(axis=3)
        passes.append(successes / episodes)
    if interactive:
        print(file=sys.stderr)
    return np.stack(passes)


def main(args: Args) -> None:
    module, config, functions, runner, update, identity = load_run(args.run_dir, args.checkpoint)
    policies = functions.policies
    if args.policy not in policies:
        method = module.__name__.removeprefix("cleanued_")
        raise ConfigError(f"unknown --policy {args.policy!r} for this {method} run; choose from {', '.join(policies)}")
    params = policies[args.policy](runner)
    network = module.ActorCritic()
    unroll = scan_unroll(config.run.devices)
    num_seeds, lstm_size = config.run.num_seeds, config.ppo.lstm_size
    sweep = parse_sweep(config.run.sweep, config.run.sweep_zip)
    entries = jax.tree.leaves(params)[0].shape[0]  # seeds, or points x seeds in a sweep
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.out or args.run_dir / "eval" / f"evaluate_{update:08d}_{stamp}.csv"
    # Said before minutes of evaluating, not after them: a read-only run folder (or --out folder) fails each write.
    check_writable(out.parent, "the evaluation's CSV" + ("" if args.out else "; give --out FILE in a writable folder"))
    if args.gif or args.risk:
        check_writable(args.run_dir / "eval", "--gif's and --risk's files, which go only into the run folder")
    rows = []
    grid = "" if sweep is None else f"{len(sweep.points)} points x "
    played = f"{grid}{num_seeds} seeds x {args.episodes} episodes"
    print(f"{args.run_dir} at update {update}, policy {args.policy}, {played}")
    if num_seeds < MIN_SEEDS_FOR_INTERVAL:
        policy = f"no interval: fewer than {MIN_SEEDS_FOR_INTERVAL} seeds"
    else:
        policy = "with their interval"
    print(f"means over {num_seeds} seeds, {policy} (interval policy, as in the report: {interval_policy(0.95)})")
    for index, name in enumerate(args.mazes):
        # A maze can take minutes (its compile, many episodes): say what is under way, not only what is done.
        print(f"evaluating {name} ({index + 1}/{len(args.mazes)})...", flush=True)
        maze = get_heldout_maze(name)

        def evaluate_seed(rng, seed_params, maze=maze, num_episodes=args.episodes):
            carry = module.initial_carry(num_episodes, lstm_size)
            return evaluate_policy(
                rng, network.apply, seed_params, carry, maze, config.env_params, num_episodes, unroll
            )

        rngs = seed_keys(jax.random.fold_in(jax.random.key(args.seed), index), config)
        returns = np.asarray(jax.jit(jax.vmap(lambda rng, p: evaluate_seed(rng, p).returns))(rngs, params))
        solve_rates, mean_returns = (returns > 0).mean(axis=1), returns.mean(axis=1)
        for entry in range(entries):
            rows.append({"maze": name, **entry_fields(entry, sweep, num_seeds), "update": update,
                         "episodes": args.episodes, "solve_rate": float(solve_rates[entry]),
                         "return": float(mean_returns[entry])})  # fmt: skip
        for point, label in point_labels(sweep):
            part = slice(point * num_seeds, (point + 1) * num_seeds)
            shown = f"{name:>18}: solve rate {describe(solve_rates[part])}   return {describe(mean_returns[part])}"
            print(shown + label)
        if args.gif:
            print(f"{'':>18}  drawing seed 0's first episode on {name}...", flush=True)
            first_seed = jax.tree.map(lambda x: x[0], params)
            result = jax.jit(functools.partial(evaluate_seed, num_episodes=1))(rngs[0], first_seed)
            level = jax.tree.map(lambda x: np.asarray(x[0]), result.levels)
            positions, directions = np.asarray(result.agent_pos[:, 0]), np.asarray(result.agent_dir[:, 0])
            steps = min(int(result.episode_length[0]), GIF_MAX_FRAMES - 1)
            positions = np.concatenate([[level.agent_pos], positions[:steps]])
            tile_size = max(MIN_CELL_PIXELS, min(16, GIF_MAX_PIXELS // (maze.width + 2)))
            window = GIF_MAX_PIXELS // tile_size if (maze.width + 2) * tile_size > GIF_MAX_PIXELS else None
            directions = np.concatenate([[level.agent_dir], directions[:steps]])
            frames = render_rollout(level, positions, directions, tile_size, window)
            check_same_run(args.run_dir, identity)
            gif = save_gif(frames, args.run_dir / "eval" / f"{name}_update_{update:08d}.gif")
            print(f"{'':>18}  {gif} ({steps} steps)")
    if rows:
        if args.out is None:
            check_same_run(args.run_dir, identity)
        write_csv(out, rows)
        print(f"wrote {out}")
    if args.risk:
        setup = RiskSetup(
            args.risk_levels,
            args.risk_episodes,
            args.risk_maze_size,
            args.risk_walls,
            args.risk_max_steps,
            args.risk_counting,
        )
        print(f"risk evaluation: {setup.describe()}")
        rng_levels, rng_play = jax.random.split(jax.random.fold_in(jax.random.key(args.seed), len(HELDOUT_MAZES)))
        levels = sample_solvable_levels(rng_levels, args.risk_levels, args.risk_maze_size, args.risk_walls)
        first, second = risk_win_rates(args, rng_play, module, network, params, config, levels)
        risk_rows = []
        for alpha in RISK_ALPHAS:
            values = [cvar(first[entry], second[entry], alpha) for entry in range(entries)]
            risk_rows += [
                {**entry_fields(entry, sweep, num_seeds), "update": update, **setup._asdict(), "alpha": alpha,
                 "win_rate": value}
                for entry, value in enumerate(values)
            ]  # fmt: skip
            for point, label in point_labels(sweep):
                part = values[point * num_seeds : (point + 1) * num_seeds]
                print(f"{'worst ' + f'{alpha:g}%':>18}: win rate {describe(part)}{label}")
        risk_out = args.run_dir / "eval" / f"risk_{update:08d}_{stamp}.csv"
        check_same_run(args.run_dir, identity)
        write_csv(risk_out, risk_rows)
        print(f"wrote {risk_out}")


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Args, prog="python -m common.evaluate", description="\n\n".join(__doc__.split("\n\n")[:2])))
