"""The settings every algos/ script shares, and a script's config by flag name.

`RunConfig` holds the run's seeds, length, folder, logging and evaluation, and `Devices` where it runs.
A script's `Config` groups its fields into nested frozen dataclasses (the method's own fields first,
then `env`, `ppo`, and `run: RunConfig` last); every field keeps a flat flag (`--run-name`, `--lr`,
`--num-devices`), so a field's name is unique across the groups and names it everywhere: on the command
line, in config.json and in `with_flags(config, lr=3e-4)`.

`parse_command_line` is tyro's, except that `--resume` starts from the run's saved config.json; the
driver then refuses any given flag that a resume must keep (`check_resumable`).
"""

import argparse
import dataclasses
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, get_type_hints

import numpy as np
import tyro
from tyro.conf import OmitArgPrefixes, UseAppendAction, arg

from common.devices import CPU_UNROLL, GPU_UNROLL, placement_problems
from common.errors import ConfigError
from envs.heldout import HELDOUT_MAZES


@dataclass(frozen=True)
class Range:
    """An `Annotated` marker of a numeric field: the values it allows (finite, `low` <= value <= `high`, and
    above `low` when `above`; with no `high`, what int32 or float32 holds, unless `host_side`: a value only Python
    reads). `range_problems` checks every marked field of a config; None is always allowed (it means "not set")."""

    low: float = -math.inf
    high: float = math.inf
    above: bool = False
    host_side: bool = False

    def allows(self, value) -> bool:
        if not math.isfinite(value) or value > self.high:
            return False
        return value > self.low if self.above else value >= self.low

    def describe(self) -> str:
        if self.high < math.inf:
            return f"in {'(' if self.above else '['}{self.low:g}, {self.high:g}]"
        if self.low == 0:
            return "positive" if self.above else "non-negative"
        return f"{'above' if self.above else 'at least'} {self.low:g}"


POSITIVE = Range(0, above=True)
NON_NEGATIVE = Range(0)
AT_LEAST_ONE = Range(1)
FRACTION = Range(0, 1)


def unset_means(meaning: str):
    """A field's --help default: `meaning` where the default is None (unset), else the default itself, since a
    script's Config may set the field (the replay scripts set --total-student-updates)."""
    return arg(help_behavior_hint=lambda shown: f"(default: {meaning if shown == 'None' else shown})")


ALL_DEVICES = "all, if the seeds or envs split evenly over them"
UNROLL_DEFAULT = f"{GPU_UNROLL} on a GPU, {CPU_UNROLL} on a CPU"


@dataclass(frozen=True)
class Devices:
    num_devices: Annotated[int | None, AT_LEAST_ONE, unset_means(ALL_DEVICES)] = None
    """Devices to use: seeds are split across them when they divide evenly, else each seed's envs are."""
    shard_envs: bool = False
    """Split each seed's env batch across the devices (PPO gradients averaged) even when the seeds divide."""
    coordinator_address: Annotated[str | None, unset_means("$JAX_COORDINATOR_ADDRESS")] = None
    """host:port of process 0 in a multi-host run (jax.distributed)."""
    num_processes: Annotated[int, AT_LEAST_ONE] = 1
    """Processes in a multi-host run, one per host ($JAX_NUM_PROCESSES overrides)."""
    process_id: Annotated[int | None, NON_NEGATIVE, unset_means("$JAX_PROCESS_ID")] = None
    """This process's index in a multi-host run; process 0 writes all files."""
    unroll: Annotated[int | None, AT_LEAST_ONE, unset_means(UNROLL_DEFAULT)] = None
    """Steps per iteration of the rollout and LSTM scans (same results to float rounding; longer compiles)."""


SCREENSHOT_HELP = (
    "Updates between PNG grids in images/ of the levels the method would train on now (DR: fresh samples; replay "
    "methods: the highest-scoring buffer levels; PAIRED: the teacher's designs); 0 disables."
)
EVAL_MAZES_HELP = f"Held-out mazes evaluated during training, any of: {', '.join(HELDOUT_MAZES)}."


@dataclass(frozen=True)
class RunConfig:
    seed: Annotated[int, Range(0, 2**32 - 1)] = 0
    """Base seed; seed i of the run uses jax.random.split(key(seed), num_seeds)[i]."""
    num_seeds: Annotated[int, AT_LEAST_ONE] = 1
    """Independent runs vmapped in one process."""
    run_name: str = "run"
    """Folder name under --runs-dir for config, logs, checkpoints, evaluations and images."""
    runs_dir: str = "runs"
    """Where run folders live."""
    resume: bool = False
    """Continue the run folder from its newest checkpoint with its saved config (run length, logging may change)."""
    overwrite: bool = False
    """Delete an existing run folder of the same name and start over."""
    init_from: Annotated[str | None, unset_means("fresh parameters")] = None
    """Start the networks from a checkpoint's or an .npz's params/... (one seed's, or per seed); fresh optimizer."""
    sweep: Annotated[
        tuple[str, ...],
        UseAppendAction,
        arg(metavar="NAME=V1,V2,...", help_behavior_hint="(default: none, the config as it is)"),
    ] = ()
    """Train a grid in one program, points x seeds vmapped: one --sweep per swept float (e.g. --sweep lr=1e-4,3e-4)."""
    sweep_zip: bool = False
    """Pair the --sweep lists element by element (equal lengths) instead of taking every combination."""
    total_updates: Annotated[int, AT_LEAST_ONE] = 30_000
    """Stop after this many updates (what an update is: the script's docstring)."""
    total_student_updates: Annotated[int | None, AT_LEAST_ONE, unset_means("no limit")] = None
    """Also stop once every seed has taken this many student PPO updates (updates that only score levels have none)."""
    total_env_steps: Annotated[int | None, Range(1, host_side=True), unset_means("no limit")] = None
    """Also stop once each seed has taken this many env steps."""
    train_seconds: Annotated[float | None, Range(0, above=True, host_side=True), unset_means("no limit")] = None
    """Also stop after this much wall-clock training time in this process."""
    log_interval: Annotated[int, AT_LEAST_ONE] = 10
    """Updates per jitted chunk: logs.csv, progress and stop checks happen between chunks."""
    eval_interval: Annotated[int, NON_NEGATIVE] = 100
    """Updates between held-out evaluations (a multiple of --log-interval; 0 disables)."""
    eval_mazes: Annotated[tuple[str, ...], arg(help=EVAL_MAZES_HELP)] = ("SixteenRooms", "Labyrinth", "StandardMaze")
    eval_episodes: Annotated[int, AT_LEAST_ONE] = 10
    """Episodes per maze per seed at each evaluation; actions are sampled, first episode counts."""
    checkpoint_interval: Annotated[int, AT_LEAST_ONE] = 100
    """Updates between checkpoints (a multiple of --log-interval)."""
    keep_checkpoints: Annotated[int, AT_LEAST_ONE] = 2
    """Newest checkpoints kept in checkpoints/."""
    archive_interval: Annotated[int, NON_NEGATIVE] = 0
    """Updates between checkpoints copied to checkpoints/archive/ and never pruned (0 disables)."""
    screenshot_interval: Annotated[int, NON_NEGATIVE, arg(help=SCREENSHOT_HELP)] = 1000
    track: bool = False
    """Log to Weights & Biases (one run per seed, grouped by run name; WANDB_MODE=offline works)."""
    wandb_project: str = "cleanued"
    """wandb project."""
    wandb_entity: Annotated[str | None, unset_means("your wandb default")] = None
    """wandb entity (team or user)."""
    devices: Annotated[Devices, OmitArgPrefixes] = Devices()
    """Devices and hosts: where the seeds and envs run and how their loops compile (common/devices.py)."""


NAME_MAX, PATH_MAX = 255, 4096
"""Linux's limits on a file name and a whole path, in bytes; a run folder's own files add up to ~80 bytes."""

FIXED_RUN_FIELDS = ("seed", "num_seeds", "init_from", "sweep", "sweep_zip")
"""RunConfig fields that define the experiment: a resumed run keeps them (and never reads --init-from again: its
checkpoint holds the parameters). Every other RunConfig field (run
length, logging, evaluation, placement) may change on resume."""


def maze_and_ppo_problems(env, ppo) -> list[tuple[bool, str]]:
    """(failed, message) checks every script's `Environment` and `PPO` groups need beyond their ranges."""
    free_cells = env.maze_size**2 - 2
    return [
        (
            ppo.num_envs % ppo.num_minibatches != 0,
            f"--num-envs ({ppo.num_envs}) must be divisible by --num-minibatches ({ppo.num_minibatches})",
        ),
        (
            env.n_walls > free_cells,
            f"--n-walls ({env.n_walls}) must leave two cells free for the agent and the goal: at most "
            f"{free_cells} in a {env.maze_size}x{env.maze_size} maze",
        ),
        (env.agent_view_size % 2 == 0, f"--agent-view-size must be odd, got {env.agent_view_size}"),
    ]


def run_problems(run: RunConfig, num_envs: int) -> list[tuple[bool, str]]:
    """(failed, message) checks of the run settings beyond their ranges, for a script's `Config.__post_init__`."""
    intervals = {
        "--eval-interval": run.eval_interval,
        "--checkpoint-interval": run.checkpoint_interval,
        "--archive-interval": run.archive_interval,
        "--screenshot-interval": run.screenshot_interval,
        "--total-updates": run.total_updates,
    }
    return [
        *(
            (value % run.log_interval, f"{flag} ({value}) must be a multiple of --log-interval ({run.log_interval})")
            for flag, value in intervals.items()
        ),
        (
            run.run_name.strip() in ("", ".", "..")
            or run.run_name != run.run_name.strip()
            or any(char in run.run_name for char in "/\\\0"),
            f"--run-name {run.run_name!r} must be one plain folder name (not blank, '.' or '..', no slashes, no "
            "spaces at either end)",
        ),
        *(
            (
                len(part.encode()) > NAME_MAX,
                f"{flag} has a {len(part.encode())}-byte name, {part[:20]!r}...: file systems take at most {NAME_MAX}",
            )
            for flag, path in (("--runs-dir", run.runs_dir), ("--run-name", run.run_name))
            for part in Path(path).parts
        ),  # fmt: skip
        (
            len(str(Path(run.runs_dir) / run.run_name).encode()) > PATH_MAX - 100,
            f"--runs-dir and --run-name make a path of {len(str(Path(run.runs_dir) / run.run_name).encode())} bytes; "
            f"the run's files need it under {PATH_MAX - 100}",
        ),
        (run.resume and run.overwrite, "--resume and --overwrite exclude each other"),
        *(
            (name not in HELDOUT_MAZES, f"unknown --eval-mazes entry {name!r}; choose from {', '.join(HELDOUT_MAZES)}")
            for name in run.eval_mazes
        ),
        *placement_problems(run.devices, run.num_seeds, num_envs),
    ]


def divisors(number: int) -> Iterator[int]:
    """The positive divisors of a positive `number`, largest first."""
    small = [candidate for candidate in range(1, math.isqrt(number) + 1) if number % candidate == 0]
    yield from (number // candidate for candidate in small)
    yield from (candidate for candidate in reversed(small) if candidate * candidate != number)


def log_intervals_resuming_at(config, update: int) -> list[int]:
    """The --log-interval values, largest first, with which `config` may continue a run saved at `update` > 0:
    divisors of `update` that pass every check of the script's Config with the other flags as they are (each
    interval and --total-updates a multiple of it, and a script's own, such as SFL's --refresh-interval). Chunks
    then end on every multiple of every interval, as in a run that was never stopped."""
    working = []
    for candidate in divisors(update):
        try:
            with_flags(config, log_interval=candidate)
        except ConfigError:
            continue
        working.append(candidate)
    return working


def range_problems(config) -> list[tuple[bool, str]]:
    """(failed, message) for every field of a (nested) config marked with a `Range`, checked before anything
    else so later checks can rely on the ranges."""
    problems = []
    hints = get_type_hints(type(config), include_extras=True)
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            problems += range_problems(value)
            continue
        for marker in getattr(hints[field.name], "__metadata__", ()):
            if isinstance(marker, Range) and value is not None:
                message = f"{flag(field.name)} must be {marker.describe()}, got {value}"
                problems.append((isinstance(value, bool) or not marker.allows(value), message))
                problems.append(compiled_width_problem(field.name, value, marker))
    return problems


INT32_MAX = 2**31 - 1
FLOAT32_MAX, FLOAT32_TINY = float(np.finfo(np.float32).max), float(np.finfo(np.float32).tiny)


def compiled_width_problem(name: str, value, marker: Range) -> tuple[bool, str]:
    """(failed, message) for a value in its range that the compiled program cannot hold: an int past int32 (unless
    its `Range` sets an upper bound of its own), a float that float32 makes infinite or zero; none for a value
    only Python reads (`host_side`)."""
    if isinstance(value, bool) or marker.host_side:
        return False, ""
    if isinstance(value, int):
        too_wide = marker.high == math.inf and abs(value) > INT32_MAX
        return too_wide, f"{flag(name)} must be at most {INT32_MAX} (a 32-bit integer when compiled), got {value}"
    too_large, too_small = abs(value) > FLOAT32_MAX, 0 < abs(value) < FLOAT32_TINY
    size = f"0 or {FLOAT32_TINY:.3g} to {FLOAT32_MAX:.3g} in size"
    message = f"{flag(name)} must be {size} (a float32 when compiled), got {value:g}"
    return math.isfinite(value) and (too_large or too_small), message


def raise_first(problems: list[tuple[bool, str]]) -> None:
    """Raise a ConfigError with the message of the first failed check."""
    for failed, message in problems:
        if failed:
            raise ConfigError(message)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _groups(config) -> dict[str, str]:
    """{field name: path to its group} for every leaf field of a nested config ('' for the top level)."""
    found = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            for name, path in _groups(value).items():
                found[name] = f"{field.name}.{path}".rstrip(".")
        else:
            if field.name in found:
                raise TypeError(f"field {field.name} appears twice in {type(config).__name__}")
            found[field.name] = ""
    return found


def flags_of(config) -> dict:
    """Every leaf field of a nested config by its name (= its flag without dashes), JSON-ready."""

    def leaves(node) -> dict:
        values = {}
        for field in dataclasses.fields(node):
            value = getattr(node, field.name)
            values.update(leaves(value) if dataclasses.is_dataclass(value) else {field.name: value})
        return values

    return json.loads(json.dumps(leaves(config)))


def with_flags(config, **values):
    """A copy of `config` with fields replaced by their flag names, in whichever group they live
    (`with_flags(dr.Config(), num_envs=8, total_updates=20)`); the result is validated like the command line."""
    groups = _groups(config)
    unknown = sorted(name for name in values if name not in groups)
    if unknown:
        raise ConfigError(f"{type(config).__name__} has no {', '.join(flag(name) for name in unknown)}")

    def replace(node, path: str):
        changes = {}
        for field in dataclasses.fields(node):
            value = getattr(node, field.name)
            if dataclasses.is_dataclass(value):
                inner = f"{path}.{field.name}".lstrip(".")
                if any(groups[name] == inner or groups[name].startswith(inner + ".") for name in values):
                    changes[field.name] = replace(value, inner)
            elif field.name in values and groups[field.name] == path:
                given = values[field.name]
                changes[field.name] = tuple(given) if isinstance(given, list) else given
        return dataclasses.replace(node, **changes) if changes else node

    return replace(config, "")


def resumable_fields(schedule_spans_run: bool) -> set[str]:
    """Fields a resumed run may change: RunConfig's (but the seeds), less the run's length when a schedule spans it
    (the script's Config declares `schedule_spans_run`, common/contract.py), which then stays as started."""
    names = {field for field in _groups(RunConfig())} - set(FIXED_RUN_FIELDS)
    if schedule_spans_run:
        names -= {"total_updates", "total_student_updates"}
    return names


def config_differences(saved: dict, current: dict, may_change: set[str]) -> list[str]:
    """'--flag: saved X, now Y' for every field outside `may_change` that differs."""
    return [
        f"{flag(name)}: saved {saved.get(name)!r}, now {current.get(name)!r}"
        for name in sorted(saved.keys() | current.keys())
        if name not in may_change and saved.get(name) != current.get(name)
    ]


def check_resumable(saved: dict, config, where) -> None:
    """Raise, listing every differing flag, if `config` differs from the `saved` flags in a field a resume must
    keep."""
    differing = config_differences(saved, flags_of(config), resumable_fields(config.schedule_spans_run))
    if differing:
        raise ConfigError(f"cannot resume {where}: the config differs in {'; '.join(differing)}")


def check_same_script(saved: dict, script: str | None, run_dir: Path) -> None:
    """Refuse to resume a run (`saved`: its config.json) with another script than the one that started it."""
    if script is not None and saved["script"] != script:
        raise ConfigError(f"cannot resume {run_dir} with {script}: {saved['script']} started it; resume it with that")


def read_saved_config(run_dir: Path, resuming: bool = False) -> dict:
    """config.json of a run folder: {"script": ..., "config": {flag name: value}}, or a one-line error (`resuming`:
    one that says how a run whose config.json is gone can start over)."""
    path = run_dir / "config.json"
    if not path.is_file():
        # The run-folder marker (common.runs.MARKER) says nothing to the reader.
        entries = sorted(entry.name for entry in run_dir.iterdir()) if run_dir.is_dir() else []
        held = [name for name in entries if name != ".cleanued-run"]
        if entries == [".cleanued-run"] and resuming:  # a new run stopped or killed while it compiled
            raise ConfigError(
                f"cannot resume {run_dir}: its run never wrote anything (it was stopped while it compiled); start it "
                "again without --resume"
            )
        if held and resuming:  # what a kill during --overwrite or a deleted config.json leaves: the one way out
            shown = ", ".join(held[:5]) + (", ..." if len(held) > 5 else "")
            raise ConfigError(
                f"{run_dir} is not a run folder (no config.json; it holds {shown}): without its config the run "
                "cannot continue; the script's --overwrite starts it over if a run made it"
            )
        raise ConfigError(f"{run_dir} is not a run folder (no config.json): give the folder of a run")
    try:
        saved = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path} is not valid JSON ({error})") from None
    if not (isinstance(saved, dict) and isinstance(saved.get("script"), str) and isinstance(saved.get("config"), dict)):
        raise ConfigError(f"{path} is not a cleanued config (expected an object with 'script' and 'config')")
    return saved


def file_in_the_way(folder: Path) -> Path | None:
    """The file that stands where `folder` or a folder holding it should be, if any."""
    return next((path for path in (folder, *folder.parents) if path.exists() and not path.is_dir()), None)


def name_length_problem(path: Path) -> str | None:
    """Why the file system cannot take `path`'s name (a part over NAME_MAX bytes, the whole over PATH_MAX), or None;
    asked before anything touches the path, which would fail with an OSError."""
    long_part = next((part for part in path.parts if len(part.encode()) > NAME_MAX), None)
    if long_part is not None:
        size = len(long_part.encode())
        return f"it has a {size}-byte name, {long_part[:20]!r}...: file systems take at most {NAME_MAX}"
    if len(str(path).encode()) > PATH_MAX:
        return f"its path is {len(str(path).encode())} bytes long: file systems take at most {PATH_MAX}"
    return None


def absent_folder_problem(folder: Path) -> str | None:
    """Why `folder` is not there, naming the folder that should hold it (a run's --runs-dir); None if it is."""
    too_long = name_length_problem(folder)
    if too_long:
        return too_long
    if folder.exists():
        return None
    in_the_way = file_in_the_way(folder)
    if in_the_way:
        return f"{in_the_way} is a file, not a folder"
    if folder.parent.is_dir():
        return f"it does not exist (there is no {folder.name!r} in {folder.parent})"
    return f"it does not exist, nor does {folder.parent}"


def out_path_problem(path: Path) -> tuple[str, bool]:
    """(problem, whether something is at `path`) for an output path given by a flag: ('', False) when it is free;
    a name the file system cannot take, or a folder one may not look into, is the problem."""
    problem = name_length_problem(path)
    if problem:
        return problem, False
    try:
        return "", path.exists() or path.is_symlink()
    except OSError as error:
        return f"cannot look at it ({error.strerror or error})", False


def read_config_to_resume(run_dir: Path) -> dict:
    """`read_saved_config` for --resume, saying first if the run folder is not there at all."""
    problem = absent_folder_problem(run_dir)
    if problem:
        raise ConfigError(f"cannot resume {run_dir}: {problem}")
    return read_saved_config(run_dir, resuming=True)


def config_from_saved(config_class, saved: dict, where):
    """The script's Config with the values of a saved config (flag names), checked like the command line."""
    try:
        return with_flags(config_class(), **saved)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{where}: saved config does not fit {config_class.__module__}.Config ({error})") from None


def summary(docstring: str) -> str:
    """The first paragraph of a module docstring, as one line (the head of --help)."""
    return " ".join(docstring.strip().split("\n\n")[0].split())


def groups_guide(config_class) -> str:
    """What --help's first group, which tyro titles plain 'options', holds in this script: the method's own fields
    (those of `config_class` outside its nested groups), if it has any."""
    if any(not dataclasses.is_dataclass(field.default) for field in dataclasses.fields(config_class)):
        return "options holds the method's own settings; env, ppo, run and run.devices options follow."
    return "options holds only --help: this method has no settings beyond env, ppo, run and run.devices options."


EXIT_STATUS = (
    "Exit status: 0 when the run reached its end, 2 for bad input (one error line, nothing written), 130 or 143 when "
    "Ctrl+C or SIGTERM stopped it (with a checkpoint: --resume continues)."
)


def parse_command_line(config_class, description: str, args: list[str] | None = None, script: str | None = None):
    """The script's Config from the command line (`description`, then `groups_guide`, heads --help). With --resume,
    the run's saved config.json supplies every value: flags for run length, logging and placement override it, and
    any other flag that differs from it is refused, listing every such flag; so is a run that another script
    (`script`: 'algos/dr.py') started. Without --run-name the run folder takes the script's file name."""
    description = "\n\n".join(part for part in (description, groups_guide(config_class), EXIT_STATUS) if part)
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--resume", action="store_true")
    peek.add_argument("--no-resume", dest="resume", action="store_false")
    peek.add_argument("--overwrite", action="store_true")
    peek.add_argument("--no-overwrite", dest="overwrite", action="store_false")
    peek.add_argument("--sweep", action="append")
    peek.add_argument("--run-name")
    peek.add_argument("--runs-dir")
    known, _ = peek.parse_known_args(args)
    # A run folder is named after its script's file by default, so a copy of a script (a variant) never writes
    # into the original's runs.
    defaults = config_class() if script is None else with_flags(config_class(), run_name=Path(script).stem)
    if not known.resume:
        return tyro.cli(config_class, description=description, args=args, default=defaults)
    if known.overwrite:
        raise ConfigError("--resume and --overwrite exclude each other")
    runs_dir, run_name = known.runs_dir or defaults.run.runs_dir, known.run_name or defaults.run.run_name
    run_dir = Path(runs_dir) / run_name
    saved = read_config_to_resume(run_dir)
    check_same_script(saved, script, run_dir)
    # The run continues in the folder it was read from, wherever config.json says it started (a copied folder).
    here = {"runs_dir": runs_dir, "run_name": run_name, "resume": True, "overwrite": False}
    start = config_from_saved(config_class, {**saved["config"], **here}, run_dir)
    if known.sweep is not None:  # given again, the lists replace the saved ones (appended, each name came twice)
        start = with_flags(start, sweep=())
    return tyro.cli(config_class, description=description, args=args, default=start)
