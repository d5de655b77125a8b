"""Fork seeds of a cleanued run at one of its checkpoints: a new run folder whose seeds are copies of the chosen
seeds' whole state there (networks, optimizer, level buffer, counters), each copy with fresh random keys, so that
the script's `--resume` continues every copy under other random draws.

A seed that stalls in every run of the same seed may be in a trap its curriculum cannot leave, or it may have had
bad luck after the checkpoint: if its copies stall too, the state at the checkpoint holds the cause (and the
statistics logged up to it are where to look); if they learn like the other seeds, the cause came later. Copies of a
healthy seed, forked in the same folder, are the control.

Seed j of the new run is a copy of `--seeds[j // --forks]`; its logs.csv starts with that seed's rows up to the
checkpoint. The new run's `seed` is `--fork-seed`, from which the copies' keys are drawn. `--buffer-from` gives the
copies another seed's level buffer, `--fresh-optimizer` a new run's optimizer state, `--params-from` and `--layers`
some of another seed's layers. Then:

    python benchmarks/learning/fork_run.py fork --run-dir RUNS/cleanued_plr --update 200 --seeds 4 7 --forks 6 \\
        --run-name plr_fork_200
    python algos/plr.py --runs-dir RUNS --run-name plr_fork_200 --resume --total-updates 500
    python benchmarks/learning/fork_run.py evaluate --run-dir RUNS/plr_fork_200 --sources 4 7 --forks 6

`evaluate` plays each archived checkpoint of a run on the training distribution, as the learning comparison's
evaluate stage does (benchmarks/learning/learning_vs_minimax_evaluate.py: its 512 levels and seeds), and prints the
solve rates per checkpoint and copy; `--heldout-mazes` adds the comparison's held-out evaluation from `--heldout-from`
on. A checkpoint's seeds play in one vmapped call, so hundreds of seeds trained on a GPU are evaluated there too:

    python benchmarks/learning/fork_run.py evaluate --run-dir RUNS/plr_many --heldout-mazes SixteenRooms Labyrinth \\
        StandardMaze --heldout-from 500 --out RUNS/plr_many/evaluations.jsonl

`params` writes chosen seeds' student parameters at a checkpoint (0: the initial ones, made again from the run's
seed) as an .npz of `params/<path>` arrays, one seed's or stacked in --seeds order: what the scripts' --init-from and
the learning comparison's --init-from read, so other runs, or minimax, start where a seed of this run started:

    python benchmarks/learning/fork_run.py params --run-dir RUNS/cleanued_plr --update 0 --seeds 4 --out seed4.npz
"""

import csv
import dataclasses
import json
import os
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated

import jax
import numpy as np
import tyro

# SCAFFOLDING: put the repo root on sys.path so the script runs as `python benchmarks/learning/fork_run.py`.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.learning.learning_vs_minimax_config import Args as HarnessArgs  # noqa: E402
from benchmarks.learning.learning_vs_minimax_config import heldout_maze_problems  # noqa: E402
from benchmarks.learning.learning_vs_minimax_evaluate import Evaluator  # noqa: E402
from common.checkpoint import Checkpoints, checkpoint_path, checkpoint_update, list_checkpoints, load  # noqa: E402
from common.config import (  # noqa: E402
    AT_LEAST_ONE,
    NON_NEGATIVE,
    flags_of,
    raise_first,
    range_problems,
    read_saved_config,
    with_flags,
)
from common.errors import ConfigError  # noqa: E402
from common.evaluate import load_run  # noqa: E402
from common.init_from import NPZ_PREFIX, flat_names  # noqa: E402
from common.runs import one_line_errors, open_run_folder, remove_unstarted, start_run  # noqa: E402
from common.sweep import run_functions  # noqa: E402


@dataclass(frozen=True)
class Fork:
    """Make the forked run folder (train it with the script's --resume)."""

    run_dir: Path
    """The run to fork."""
    update: Annotated[int, NON_NEGATIVE]
    """The checkpoint to fork at (in checkpoints/ or checkpoints/archive/); 0 without one: the run's initial state,
    made again from its seed (the copies then share only their initial parameters)."""
    seeds: tuple[int, ...]
    """The run's seeds to copy, in the new run's order."""
    run_name: str
    """The new run's folder name (under --runs-dir)."""
    forks: Annotated[int, AT_LEAST_ONE] = 6
    """Copies of each seed."""
    fork_seed: int = 1
    """The new run's seed: the copies' keys are drawn from it."""
    buffer_from: tuple[int, ...] = ()
    """Seeds whose level buffer the copies take instead of their own, one per --seeds (empty: their own): a copy of
    a stalled seed's networks and optimizer with a healthy seed's buffer, and the reverse, tell whether the policy or
    the curriculum holds a stall."""
    params_from: tuple[int, ...] = ()
    """Seeds whose `--layers` the copies take instead of their own, one per --seeds (with --fresh-optimizer: the
    Adam moments of those layers would be the other seed's): which layers hold a stall."""
    layers: tuple[str, ...] = ()
    """The network's top-level modules `--params-from` replaces (e.g. Dense_0 Dense_1, the policy head)."""
    fresh_optimizer: bool = False
    """Give the copies a new run's optimizer state (Adam's moments and step count) and keep the rest: tells whether
    the optimizer's moments hold a stall."""
    runs_dir: Path | None = None
    """Where the new run's folder goes (default: the runs_dir the forked run's config.json names)."""

    def __post_init__(self):
        raise_first(range_problems(self))


@dataclass(frozen=True)
class Evaluate:
    """Solve rates of a run's archived checkpoints on the training distribution, per seed."""

    run_dir: Path
    """The run folder to evaluate (a fork's, or any run's with archived checkpoints)."""
    sources: tuple[int, ...] = ()
    """The forked seeds (`fork --seeds`), to label each seed of a forked run; empty: the run's own seeds."""
    forks: Annotated[int, AT_LEAST_ONE] = 6
    """`fork --forks` of the forked run."""
    seeds: tuple[int, ...] = ()
    """Only these seeds of the run (empty: all)."""
    heldout_mazes: tuple[str, ...] = ()
    """Also play these held-out mazes (the comparison's --heldout-episodes attempts each, its draws per maze and
    seed) at every checkpoint from --heldout-from on."""
    heldout_from: Annotated[int, NON_NEGATIVE] = 0
    """The first checkpoint (rollouts) played on --heldout-mazes: the comparison's --heldout-from, to pool with it."""
    out: Path | None = None
    """Also write the records here as JSON lines (replaced)."""

    def __post_init__(self):
        raise_first([*range_problems(self), *heldout_maze_problems(self.heldout_mazes)])


@dataclass(frozen=True)
class Params:
    """Write seeds' student parameters at a checkpoint as an .npz of params/<path> arrays."""

    run_dir: Path
    """The run folder whose seeds' parameters are written."""
    update: Annotated[int, NON_NEGATIVE]
    """The checkpoint (0 without one: the run's initial parameters, made again from its seed)."""
    seeds: tuple[int, ...]
    """The run's seeds: one gives one seed's arrays, several a stack in this order."""
    out: Path
    """The .npz to write (replaced)."""

    def __post_init__(self):
        raise_first(range_problems(self))


def checkpoint_at(run_dir: Path, update: int) -> Path:
    """The run's checkpoint of `update`, archived or kept."""
    for folder in (run_dir / "checkpoints", run_dir / "checkpoints" / "archive"):
        if (path := checkpoint_path(folder, update)).is_file():
            return path
    saved = sorted({checkpoint_update(path) for path in archived_checkpoints(run_dir)})
    raise ConfigError(f"{run_dir} has no checkpoint of update {update} (it has {saved or 'none'})")


def archived_checkpoints(run_dir: Path) -> list[Path]:
    """Every checkpoint of the run, one per update, oldest first."""
    found = list_checkpoints(run_dir / "checkpoints" / "archive") + list_checkpoints(run_dir / "checkpoints")
    return sorted({checkpoint_update(path): path for path in found}.values(), key=checkpoint_update)


PLR_RUNNER_FIELDS = {"train_state", "buffer", "rng", "rng_eval", "update", "student_updates"}
"""A Robust PLR runner's fields: its level buffer is its whole curriculum state, so --buffer-from swaps all of it."""


def check_copies(args: Fork, runner) -> None:
    """Refuse variants the forked run's state cannot take: --buffer-from where the curriculum is more than the level
    buffer, the network options where the networks are not one train_state, and --params-from / --layers unless they
    go together, with --fresh-optimizer, one seed per --seeds and layers the network has."""
    fields = {field.name for field in dataclasses.fields(runner)}
    if args.buffer_from:
        if len(args.buffer_from) != len(args.seeds):
            raise ConfigError(
                f"--buffer-from names {len(args.buffer_from)} seeds; give one per --seeds ({len(args.seeds)})"
            )
        if "buffer" not in fields:
            raise ConfigError(f"--buffer-from: {args.run_dir}'s method has no level buffer")
        if extra := sorted(fields - PLR_RUNNER_FIELDS):
            raise ConfigError(
                f"--buffer-from: {args.run_dir}'s curriculum also holds {extra}, which would stay the copy's own"
            )
    if (args.fresh_optimizer or args.params_from or args.layers) and "train_state" not in fields:
        raise ConfigError(f"--fresh-optimizer, --params-from: {args.run_dir}'s method has no single train_state")
    if not args.params_from and not args.layers:
        return
    if not (args.params_from and args.layers):
        raise ConfigError("--params-from and --layers go together: the seeds to take layers from, and which layers")
    if len(args.params_from) != len(args.seeds):
        raise ConfigError(
            f"--params-from names {len(args.params_from)} seeds; give one per --seeds ({len(args.seeds)})"
        )
    params = runner.train_state.params["params"]
    if unknown := [layer for layer in args.layers if layer not in params]:
        raise ConfigError(f"--layers {unknown}: the network's layers are {sorted(params)}")
    if not args.fresh_optimizer:
        raise ConfigError(
            "--params-from needs --fresh-optimizer: the Adam moments of the layers taken are another seed's"
        )


def forked_state(runner, sources: np.ndarray, fork_key, buffer_sources: np.ndarray | None = None):
    """`runner` (every leaf led by the seed axis) gathered at `sources` (its `buffer` at `buffer_sources` if given),
    every random key replaced by a fresh one per copy and per key leaf."""
    gathered = jax.tree.map(lambda leaf: leaf[sources], runner)
    if buffer_sources is not None:
        gathered = gathered.replace(buffer=jax.tree.map(lambda leaf: leaf[buffer_sources], runner.buffer))
    leaves, treedef = jax.tree.flatten(gathered)
    fresh = [
        jax.random.split(jax.random.fold_in(fork_key, index), leaf.shape)
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)
        else leaf
        for index, leaf in enumerate(leaves)
    ]
    return jax.tree.unflatten(treedef, fresh)


def copy_log_rows(source: Path, target: Path, sources: np.ndarray, update: int) -> int:
    """Write `target` with `source`'s header and, for each new seed j, the rows of seed `sources[j]` up to `update`
    renumbered j. Returns the rows written."""
    with open(source, newline="") as file:
        reader = csv.reader(file)
        header = next(reader)
        rows = list(reader)
    seed, at = header.index("seed"), header.index("update")
    written = []
    for new_seed, old_seed in enumerate(sources.tolist()):
        for row in rows:
            if int(row[seed]) == old_seed and int(row[at]) <= update:
                written.append([str(new_seed) if column == seed else cell for column, cell in enumerate(row)])
    written.sort(key=lambda row: (int(row[at]), int(row[seed])))
    with open(target, "w", newline="") as file:
        csv.writer(file).writerows([header, *written])
    return len(written)


def check_seeds(run_dir: Path, num_seeds: int, named: tuple[tuple[str, tuple[int, ...]], ...]) -> None:
    """Refuse any of the (flag, seeds) pairs that names a seed the run does not have."""
    for flag, seeds in named:
        if bad := [seed for seed in seeds if not 0 <= seed < num_seeds]:
            raise ConfigError(f"{flag} {bad}: {run_dir} has seeds 0-{num_seeds - 1}")


def run_at(run_dir: Path, update: int, check=lambda loaded: None):
    """The run's script, config and state at `update` (common.evaluate.load_run's answer): its checkpoint, or at 0
    without one its initial state made again from its seed as the driver made it. `check(loaded)` runs before that
    state is computed."""
    initial = update == 0 and not any(checkpoint_update(path) == 0 for path in archived_checkpoints(run_dir))
    loaded = load_run(run_dir, None if initial else checkpoint_at(run_dir, update))
    check(loaded)
    if initial and read_saved_config(run_dir)["config"].get("init_from"):
        raise ConfigError(f"--update 0: {run_dir} started from --init-from, so its initial state cannot be remade")
    num_seeds = loaded.config.run.num_seeds
    if shared := [leaf.shape for leaf in jax.tree.leaves(loaded.runner) if leaf.shape[:1] != (num_seeds,)]:
        raise ConfigError(f"{run_dir}'s state has leaves without a seed axis ({shared[:3]}): cannot take seeds of it")
    if initial:
        runner = jax.jit(loaded.functions.init)(jax.random.split(jax.random.key(loaded.config.run.seed), num_seeds))
        loaded = loaded._replace(runner=runner)
    return loaded


def fork(args: Fork) -> Path:
    """Make the forked run folder; returns it. Everything is checked before anything is compiled or written, and a
    fork that fails while writing leaves no folder."""

    def check(loaded):
        named = (("--seeds", args.seeds), ("--buffer-from", args.buffer_from), ("--params-from", args.params_from))
        check_seeds(args.run_dir, loaded.config.run.num_seeds, named)
        check_copies(args, loaded.runner)

    loaded = run_at(args.run_dir, args.update, check)
    sources = np.repeat(np.asarray(args.seeds), args.forks)
    buffer_sources = np.repeat(np.asarray(args.buffer_from), args.forks) if args.buffer_from else None
    config = with_flags(
        loaded.config,
        num_seeds=len(sources),
        seed=args.fork_seed,
        run_name=args.run_name,
        runs_dir=str(args.runs_dir or loaded.config.run.runs_dir),
        archive_interval=loaded.config.run.archive_interval or loaded.config.run.checkpoint_interval,
        resume=False,
        overwrite=False,  # a source started with --overwrite must not pass it on: a fork never deletes a folder
    )
    state = forked_state(loaded.runner, sources, jax.random.key(args.fork_seed), buffer_sources)
    script = read_saved_config(args.run_dir)["script"]
    if args.params_from:
        layer_sources = np.repeat(np.asarray(args.params_from), args.forks)
        params = dict(state.train_state.params["params"])
        for layer in args.layers:
            params[layer] = jax.tree.map(
                lambda leaf: leaf[layer_sources], loaded.runner.train_state.params["params"][layer]
            )
        state = state.replace(train_state=state.train_state.replace(params={"params": params}))
    if args.fresh_optimizer:
        functions = run_functions(config, loaded.module.make_train, script)
        new_run = jax.jit(functions.init)(jax.random.split(jax.random.key(args.fork_seed), len(sources)))
        state = state.replace(train_state=state.train_state.replace(opt_state=new_run.train_state.opt_state))
    folder = open_run_folder(config, script)
    try:
        start_run(folder.path, config, script)
    except BaseException:
        remove_unstarted(folder)  # refused (a file put in meanwhile): what is in the folder stays
        os.close(folder.lock)
        raise
    try:
        saved = Checkpoints(folder.path, config.run.keep_checkpoints, config.run.archive_interval, flags_of(config))
        saved.save(state, args.update)
        rows = 0
        if (args.run_dir / "logs.csv").is_file():  # a run stopped before its first chunk has none
            rows = copy_log_rows(args.run_dir / "logs.csv", folder.path / "logs.csv", sources, args.update)
    except BaseException:
        shutil.rmtree(folder.path)  # start_run found it empty: everything in it is this call's
        raise
    finally:
        os.close(folder.lock)
    buffers = f" with the buffers of seeds {args.buffer_from}" if args.buffer_from else ""
    optimizer = " and a new optimizer state" if args.fresh_optimizer else ""
    if args.params_from:
        optimizer = f", the layers {args.layers} of seeds {args.params_from}{optimizer}"
    copies = f"seeds {args.seeds}{buffers}{optimizer} x {args.forks}"
    print(f"{folder.path}: {copies} at update {args.update} ({rows} log rows)")
    return folder.path


def write_params(args: Params) -> Path:
    """Write `args.out`: the student's parameters of `args.seeds` at `args.update`; returns it."""
    if not args.seeds:
        raise ConfigError("--seeds: name at least one seed")
    if args.out.suffix != ".npz" or not args.out.parent.is_dir():
        raise ConfigError(f"--out {args.out}: give an .npz file in an existing folder")

    def check(loaded):
        check_seeds(args.run_dir, loaded.config.run.num_seeds, (("--seeds", args.seeds),))
        if "student" not in loaded.functions.policies:
            raise ConfigError(f"{args.run_dir}'s method has no student policy")

    loaded = run_at(args.run_dir, args.update, check)
    params = loaded.functions.policies["student"](loaded.runner)
    chosen = np.asarray(args.seeds) if len(args.seeds) > 1 else args.seeds[0]
    flat = {name: np.asarray(leaf)[chosen] for name, leaf in flat_names(params["params"], NPZ_PREFIX).items()}
    temporary = args.out.with_name(f".{args.out.name}.tmp-{os.getpid()}")
    with open(temporary, "wb") as handle:
        np.savez(handle, **flat)
    os.replace(temporary, args.out)  # whole or not at all
    seeds = " ".join(map(str, args.seeds))
    print(f"{args.out}: the student parameters of seeds {seeds} of {args.run_dir} at update {args.update}")
    return args.out


def evaluate(args: Evaluate) -> list[dict]:
    """One record per archived checkpoint and seed of the training-distribution solve rate, and one per held-out
    maze, checkpoint from --heldout-from and seed; each checkpoint's seeds are played in one vmapped call."""
    num_seeds = read_saved_config(args.run_dir)["config"]["num_seeds"]
    if args.sources and len(args.sources) * args.forks != num_seeds:
        raise ConfigError(
            f"--sources {args.sources} x --forks {args.forks} is not {args.run_dir}'s {num_seeds} seeds: "
            "give the fork's own --seeds and --forks"
        )
    if bad := [seed for seed in args.seeds if not 0 <= seed < num_seeds]:
        raise ConfigError(f"--seeds {bad}: {args.run_dir} has seeds 0-{num_seeds - 1}")
    if args.out and not args.out.parent.is_dir():
        raise ConfigError(f"--out {args.out}: {args.out.parent} is not a folder")
    paths = archived_checkpoints(args.run_dir)
    if not paths:
        return []
    loaded = load_run(args.run_dir, paths[0])  # the script's functions once; each checkpoint then loads into its state
    config = loaded.config
    harness = replace(
        HarnessArgs(),
        maze_size=config.env.maze_size,
        n_walls=config.env.n_walls,
        max_steps=config.env.max_steps,
        lstm_size=config.ppo.lstm_size,
    )
    evaluator = Evaluator(harness)
    seeds = np.asarray(args.seeds or range(num_seeds))
    records = []
    for path in paths:
        runner, update, _ = load(path, loaded.runner)
        params = jax.tree.map(lambda x: x[seeds], loaded.functions.policies["student"](runner))
        played = [("train_levels", None, harness.train_levels, evaluator.training_levels_seeds(params, update, seeds))]
        if update >= args.heldout_from:
            played += [
                ("heldout", maze, harness.heldout_episodes, evaluator.heldout_seeds(params, maze, seeds))
                for maze in args.heldout_mazes
            ]
        for kind, maze, episodes, returns in played:
            for seed, seed_returns in zip(seeds.tolist(), returns, strict=True):
                source = args.sources[seed // args.forks] if args.sources else seed
                record = {"update": update, "seed": seed, "source": source, "kind": kind, "maze": maze}
                record |= {"solve_rate": float(np.mean(seed_returns > 0)), "episodes": episodes}
                records.append(record | {"eval_seed": harness.eval_seed})
    return records


def main() -> None:
    with one_line_errors():
        command = tyro.extras.subcommand_cli_from_dict(
            {"fork": Fork, "evaluate": Evaluate, "params": Params}, description=__doc__
        )
        if isinstance(command, Fork):
            fork(command)
            return
        if isinstance(command, Params):
            write_params(command)
            return
        records = evaluate(command)
        if command.out:
            command.out.write_text("".join(json.dumps(record) + "\n" for record in records))
        print("| update | source seed | solve rates of its copies |\n|---:|---:|---|")
        trained = [record for record in records if record["kind"] == "train_levels"]
        for update in sorted({record["update"] for record in trained}):
            for source in dict.fromkeys(record["source"] for record in trained):
                rates = [r["solve_rate"] for r in trained if r["update"] == update and r["source"] == source]
                print(f"| {update} | {source} | {' '.join(f'{rate:.2f}' for rate in rates)} |")
        if heldout := [record for record in records if record["kind"] == "heldout"]:
            print("\n| update | held-out maze | mean solve rate | seeds solving any |\n|---:|---|---:|---:|")
            for update, maze in dict.fromkeys((record["update"], record["maze"]) for record in heldout):
                rates = [r["solve_rate"] for r in heldout if (r["update"], r["maze"]) == (update, maze)]
                print(f"| {update} | {maze} | {np.mean(rates):.3f} | {np.count_nonzero(rates)} of {len(rates)} |")


if __name__ == "__main__":
    main()
