"""--sweep: a grid of scalar hyperparameters trained in one program, every point vmapped with the seeds.

`--sweep lr=1e-4,3e-4 --sweep temperature=0.1,0.3` trains the grid's points (the product of the lists, or with
--sweep-zip the lists paired element by element) at --num-seeds seeds each, all in one jitted program: the runner
state's leading axis holds point p's seed s at p * num_seeds + s, and seed s starts from the key a run of that point
alone would give it (split(key(--seed), --num-seeds)[s]), so a point equals the same config run alone up to float
rounding (a bigger batch sums in another order).

The scripts know nothing of it. Each point's values reach the script's code as the config itself: inside the
vmapped program, the script's `make_train` is built again from a config whose swept fields hold the entry's traced
values, and its one-seed functions run on that entry. A name can be swept where that traces: a float field of the
method's or the PPO settings that changes no shape and no Python branch; any other is refused in one line that
lists the names that can. The networks' optimizer (`TrainState.tx`) is rebuilt inside the trace from the traced
config, so --lr and --max-grad-norm sweep too; outside the program every entry holds the unswept config's.
"""

import copy
import dataclasses
import itertools
import math
import typing
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax.training.train_state import TrainState

from common.config import Range, _groups, compiled_width_problem, flag, with_flags
from common.errors import ConfigError

NOT_SWEPT_GROUPS = ("run",)
"""Groups whose floats are not hyperparameters of the method (--train-seconds is a stop criterion)."""


class Sweep(NamedTuple):
    names: tuple[str, ...]  # the swept fields, in the order given
    points: tuple[dict, ...]  # {name: value} of each point, in order (the first list varies slowest)

    def label(self, point: int) -> str:
        return " ".join(f"{name}={value_text(self.points[point][name])}" for name in self.names)


def value_text(value: float) -> str:
    """A swept value as labels print it: `:g`'s six significant digits, or as many more as give back the float32 the
    program trains with (nine always do). The same text in every folder (the report pools points by label), and
    distinct within a sweep, whose values are distinct float32s."""
    for digits in range(6, 9):
        text = f"{value:.{digits}g}"
        if np.float32(float(text)) == np.float32(value):
            return text
    return f"{value:.9g}"


def parse_sweep(specs: tuple[str, ...], zipped: bool) -> Sweep | None:
    """The grid of `--sweep NAME=V1,V2,...` (each value a number), or None without one; a one-line error otherwise."""
    if not specs:
        if zipped:
            raise ConfigError("--sweep-zip pairs the lists of --sweep: give --sweep too")
        return None
    names, lists = [], []
    for spec in specs:
        name, equals, text = spec.partition("=")
        name = name.strip().lstrip("-").replace("-", "_")
        if not equals or not name or not text:
            raise ConfigError(f"--sweep {spec!r}: give NAME=V1,V2,... (e.g. lr=1e-4,3e-4)")
        if name in names:
            raise ConfigError(f"--sweep names {flag(name)} twice: give its values in one list")
        try:
            values = [float(value) for value in text.split(",")]
        except ValueError:
            raise ConfigError(f"--sweep {spec!r}: every value must be a finite number") from None
        if not all(math.isfinite(value) for value in values):
            raise ConfigError(f"--sweep {spec!r}: every value must be a finite number")
        for value in values:
            too_wide, message = compiled_width_problem(name, value, Range())
            if too_wide:
                raise ConfigError(f"--sweep {spec!r}: {message}")
        if len(set(np.float32(values).tolist())) < len(values):  # the program holds each value as a float32
            raise ConfigError(f"--sweep {spec!r}: a value twice (as a float32) would train one point twice")
        names.append(name)
        lists.append(values)
    if zipped:
        if len({len(values) for values in lists}) > 1:
            lengths = ", ".join(f"{flag(name)} {len(values)}" for name, values in zip(names, lists, strict=True))
            raise ConfigError(f"--sweep-zip pairs the lists element by element: they need one length ({lengths})")
        combinations = zip(*lists, strict=True)
    else:
        combinations = itertools.product(*lists)
    points = tuple(dict(zip(names, values, strict=True)) for values in combinations)
    return Sweep(tuple(names), points)


def float_fields(config) -> list[str]:
    """The fields a sweep may name at most: floats outside the run settings."""
    found = []

    def visit(node, group: str):
        hints = typing.get_type_hints(type(node))
        for field in dataclasses.fields(node):
            value = getattr(node, field.name)
            if dataclasses.is_dataclass(value):
                visit(value, field.name)
            elif group not in NOT_SWEPT_GROUPS and typing.get_origin(hints[field.name]) is None:
                if hints[field.name] is float:
                    found.append(field.name)

    visit(config, "")
    return found


def with_values(config, values: dict):
    """A copy of `config` with the named fields holding `values` (traced arrays), not validated (tracers cannot be)."""
    groups = _groups(config)

    def rebuild(node, path: str):
        copied = copy.copy(node)
        for field in dataclasses.fields(node):
            value = getattr(node, field.name)
            if dataclasses.is_dataclass(value):
                object.__setattr__(copied, field.name, rebuild(value, f"{path}.{field.name}".lstrip(".")))
            elif field.name in values and groups[field.name] == path:
                object.__setattr__(copied, field.name, values[field.name])
        return copied

    return rebuild(config, "")


def point_configs(config, sweep: Sweep) -> list:
    """Each point's config, validated as its command line would be (a value out of range: one line naming it)."""
    configs = []
    for index, point in enumerate(sweep.points):
        try:
            configs.append(with_flags(config, **point))
        except ConfigError as error:
            raise ConfigError(f"--sweep point {index} ({sweep.label(index)}): {error}") from None
    return configs


def _unswept(config):
    """The config the sweep's traced copies start from: no --init-from (read once, outside) and no sweep."""
    return with_flags(config, init_from=None, sweep=(), sweep_zip=False)


def traces(config, make_train: Callable, names: tuple[str, ...]) -> bool:
    """Whether every function of a seed (init, the refresh before a chunk, step, evaluate, levels) builds with
    `names` traced: nothing of theirs decides a shape or a branch."""
    base = _unswept(config)

    def program_of(values):
        functions = make_train(with_values(base, values)).one_seed
        runner = functions.init(jax.random.key(0))
        if functions.before_step is not None:  # it takes one point's seeds
            seeds = functions.before_step(jax.tree.map(lambda leaf: jnp.asarray(leaf)[None], runner))
            runner = jax.tree.map(lambda leaf: leaf[0], seeds)
        return functions.step(runner), functions.evaluate(runner), functions.levels(runner)

    try:
        jax.eval_shape(program_of, {name: jnp.float32(1.0) for name in names})
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerBoolConversionError, TypeError):
        return False
    return True


def tracing_names(config, make_train: Callable, names: tuple[str, ...]) -> list[str]:
    """The `names` that trace, found by halving: one trace when they all do, a few more per name that does not."""
    if not names or traces(config, make_train, names):
        return list(names)
    if len(names) == 1:
        return []
    middle = len(names) // 2
    return tracing_names(config, make_train, names[:middle]) + tracing_names(config, make_train, names[middle:])


def check_sweepable(config, make_train: Callable, sweep: Sweep) -> None:
    """A one-line error for the first name that is no field, or else the first that is no float or changes a shape or
    a branch, listing the names a sweep can take (those are found by tracing each, only when one is refused)."""
    fields = _groups(config)
    candidates = float_fields(config)
    if set(sweep.names) <= set(candidates) and traces(config, make_train, sweep.names):
        return
    sweepable = set(tracing_names(config, make_train, tuple(candidates)))
    takes = ", ".join(flag(name) for name in candidates if name in sweepable)
    unknown = [name for name in sweep.names if name not in fields]
    if unknown:
        raise ConfigError(f"--sweep {flag(unknown[0])} is not a setting of this script; a sweep can take {takes}")
    refused = next(name for name in sweep.names if name not in sweepable)
    raise ConfigError(
        f"--sweep {flag(refused)} changes a shape or a branch, or is not a float; a sweep can take {takes}"
    )


class _Metadata(NamedTuple):
    tx: object
    apply_fn: object


def _train_states(runner) -> list[TrainState]:
    leaves = jax.tree_util.tree_leaves(runner, is_leaf=lambda node: isinstance(node, TrainState))
    return [leaf for leaf in leaves if isinstance(leaf, TrainState)]


def _with_metadata(runner, metadata: list[_Metadata]):
    """`runner` with its TrainStates' optimizer and apply function, in tree order, taken from `metadata`."""
    remaining = iter(metadata)

    def replace(node):
        if not isinstance(node, TrainState):
            return node
        taken = next(remaining)
        return node.replace(tx=taken.tx, apply_fn=taken.apply_fn)

    return jax.tree_util.tree_map(replace, runner, is_leaf=lambda node: isinstance(node, TrainState))


def _metadata(runner) -> list[_Metadata]:
    return [_Metadata(state.tx, state.apply_fn) for state in _train_states(runner)]


class SweptFunctions(NamedTuple):
    """The one-seed functions of every entry, each built from its traced config."""

    init: Callable  # (rng, values) -> runner state
    step: Callable  # (runner, values) -> (runner, metrics)
    evaluate: Callable  # (runner, values) -> metrics
    levels: Callable  # (runner, values) -> (levels, numbers)
    before_step: Callable | None  # (runner of one point's seeds, values) -> runner


def swept_one_seed(config, make_train: Callable, base_runner) -> SweptFunctions:
    """One seed's functions taking the entry's swept values; runner states in and out hold `base_runner`'s optimizers
    (the unswept config's), so their tree, and the compiled program, stay the same from chunk to chunk."""
    base = _unswept(config)
    outside = _metadata(base_runner)

    def functions(values):
        return make_train(with_values(base, values)).one_seed

    def inside(one_seed) -> list[_Metadata]:
        # Traced inline, not under eval_shape: a script builds its optimizer inside init, and the optimizer's traced
        # values must belong to this trace. The init's own work is unused, so XLA drops it.
        return _metadata(one_seed.init(jax.random.key(0)))

    def init(rng, values):
        return _with_metadata(functions(values).init(rng), outside)

    def step(runner, values):
        one_seed = functions(values)
        runner, metrics = one_seed.step(_with_metadata(runner, inside(one_seed)))
        return _with_metadata(runner, outside), metrics

    def evaluate(runner, values):
        one_seed = functions(values)
        return one_seed.evaluate(_with_metadata(runner, inside(one_seed)))

    def levels(runner, values):
        one_seed = functions(values)
        return one_seed.levels(_with_metadata(runner, inside(one_seed)))

    before_step = None
    if make_train(base).one_seed.before_step is not None:

        def before_step(runner, values):
            one_seed = functions(values)
            return _with_metadata(one_seed.before_step(_with_metadata(runner, inside(one_seed))), outside)

    return SweptFunctions(init, step, evaluate, levels, before_step)


def entry_values(sweep: Sweep, num_seeds: int) -> dict[str, np.ndarray]:
    """{name: float32[points * num_seeds]}: each entry's value, point p's seeds at p * num_seeds .. + num_seeds - 1."""
    return {
        name: np.repeat(np.array([point[name] for point in sweep.points], np.float32), num_seeds)
        for name in sweep.names
    }


def _tile_keys(rngs, times: int):
    return jax.random.wrap_key_data(jnp.tile(jax.random.key_data(rngs), (times, 1)))


def over_points(config, make_train: Callable, base, sweep: Sweep):
    """The run's functions over every point and seed (leading axis points * seeds), from the script's `base` ones
    (a `common.contract.BatchedOverSeeds` of the unswept config); `init` takes the seeds' keys, as without a sweep."""
    from common.contract import BatchedOverSeeds, whole_run
    from common.init_from import read_parameters, with_parameters

    num_seeds, num_points = config.run.num_seeds, len(sweep.points)
    values = {name: jnp.asarray(array) for name, array in entry_values(sweep, num_seeds).items()}
    point_values = {name: jnp.asarray([point[name] for point in sweep.points], jnp.float32) for name in sweep.names}
    swept = swept_one_seed(config, make_train, jax.eval_shape(base.one_seed.init, jax.random.key(0)))
    starting_parameters = None
    if config.run.init_from is not None and not config.run.resume:
        shapes = jax.eval_shape(base.init, jax.random.split(jax.random.key(0), num_seeds))
        read = read_parameters(Path(config.run.init_from), shapes, num_seeds)
        starting_parameters = jax.tree.map(lambda leaf: np.tile(leaf, (num_points,) + (1,) * (leaf.ndim - 1)), read)

    def init(rngs):
        runner = jax.lax.map(lambda entry: swept.init(*entry), (_tile_keys(rngs, num_points), values))
        return runner if starting_parameters is None else with_parameters(runner, starting_parameters)

    def grouped(tree):
        return jax.tree.map(lambda leaf: leaf.reshape(num_points, num_seeds, *leaf.shape[1:]), tree)

    def ungrouped(tree):
        return jax.tree.map(lambda leaf: leaf.reshape(num_points * num_seeds, *leaf.shape[2:]), tree)

    def chunk(runner):
        return jax.vmap(swept.step)(runner, values)

    if swept.before_step is None:
        step = chunk
    else:

        def step(runner):
            # One point after another, each on all its seeds as a script's own refresh runs: vmapped over points,
            # the refresh's lax.cond (on an update count a point's seeds share) would run both branches every chunk.
            refreshed = jax.lax.map(lambda point: swept.before_step(*point), (grouped(runner), point_values))
            return chunk(ungrouped(refreshed))

    budget = config.run.total_student_updates
    if budget is not None:
        step = stopping_each_point(step, base.student_updates, budget, num_seeds)

    def evaluate(runner):
        return jax.vmap(swept.evaluate)(runner, values)

    def levels(runner):
        return jax.vmap(swept.levels)(runner, values)

    return BatchedOverSeeds(
        init=init,
        step=step,
        evaluate=evaluate,
        levels=levels,
        train=whole_run(config, init, step, evaluate, base.student_updates),
        student_updates=base.student_updates,
        policies=base.policies,
        placement=base.placement,
        one_seed=base.one_seed,
    )


def stopped_entries(student_updates, budget: int, num_seeds: int, xp=np):
    """bool[entries]: the entries whose point has reached --total-student-updates (every one of its seeds has), as a
    run of that point alone stops (the driver checks before every chunk)."""
    per_point = student_updates.reshape(-1, num_seeds)
    reached = per_point.min(axis=1, keepdims=True) >= budget
    return xp.broadcast_to(reached, per_point.shape).reshape(-1)


def stopping_each_point(step: Callable, student_updates: Callable, budget: int, num_seeds: int) -> Callable:
    """`step` where a point that has reached --total-student-updates keeps its state, and its metrics are those of a
    chunk not run (NaN; finite), so each point stops where it would alone: the points of a Robust PLR or ACCEL sweep
    reach the budget at different updates (a replay probability sets how many updates train the student), and the
    run goes on until the last one has."""
    from common.contract import FINITE_METRIC

    def stepped(runner):
        stopped = stopped_entries(student_updates(runner), budget, num_seeds, jnp)
        next_runner, metrics = step(runner)

        def kept(old, new):
            return jnp.where(stopped.reshape(-1, *(1,) * (new.ndim - 1)), old, new)

        def unrun(key, values):
            fill = True if key == FINITE_METRIC else (jnp.nan if jnp.issubdtype(values.dtype, jnp.floating) else 0)
            return kept(jnp.full_like(values, fill), values)

        return jax.tree.map(kept, runner, next_runner), {key: unrun(key, value) for key, value in metrics.items()}

    return stepped


def run_functions(config, make_train: Callable, script: str):
    """The functions a run of `config` trains with: the script's (`make_train(config)`), or over every point of its
    --sweep, checked first (each point's values in range, every name sweepable), on one device."""
    from common.contract import check_functions

    sweep = parse_sweep(config.run.sweep, config.run.sweep_zip)
    if sweep is None:
        return check_functions(make_train(config), script)
    devices = config.run.devices
    if devices.num_devices not in (None, 1) or devices.num_processes not in (None, 1):
        raise ConfigError("--sweep trains on one device: give --num-devices 1 (or leave it unset) and one process")
    config = with_flags(config, num_devices=1)  # unset would take every device the seeds or envs split over
    functions = check_functions(make_train(config), script)
    check_sweepable(config, make_train, sweep)
    point_configs(config, sweep)
    return over_points(config, make_train, functions, sweep)
