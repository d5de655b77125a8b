"""What an algos/ script owes the driver (common/driver.py) and the evaluator (common/evaluate.py).

A script is a module with `Config`, `make_train(config)` and `HEADLINE_METRICS`, ending in
`driver.main(Config, make_train, __doc__, __file__, HEADLINE_METRICS)`:

- its `Config` declares `CONFIG_PIECES` (`check_config` names a missing one in one line when the driver starts);
- `make_train(config)` builds one seed's functions and hands them to `over_seeds`, which batches them over seeds
  and builds the pure run (`whole_run`);
- every update's metrics carry `FINITE_METRIC` (`all_finite` of losses, parameters and optimizer state); the
  driver stops on a False and does not log it.
"""

import operator
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp

from common.config import RunConfig
from common.devices import Placement, map_seeds, vmap_seeds
from common.errors import ConfigError
from common.init_from import read_parameters, with_parameters

FINITE_METRIC = "health/finite"
"""Metric key of the per-update health check the driver stops on."""


CONFIG_PIECES = {
    "run": "the run settings, a common.config.RunConfig",
    "env_steps_per_update": "env steps one update takes per seed, a positive int",
    "schedule_spans_run": "whether a schedule spans the run's length, a bool",
}
"""What a script's `Config` declares besides its own flags, and what each must be (`check_config`)."""


class OneSeed(NamedTuple):
    """A script's functions of one seed, as it handed them to `over_seeds` (what --sweep vmaps with other values)."""

    init: Callable  # rng -> runner state
    step: Callable  # runner state -> (runner state, metrics {key: [log_interval]})
    evaluate: Callable  # runner state -> held-out metrics {key: []}
    levels: Callable  # runner state -> (Level [n], {label: [n]})
    before_step: Callable | None  # runner state of all seeds -> runner state (SFL's refresh), or None


class BatchedOverSeeds(NamedTuple):
    """What a script's `make_train(config)` returns, built by `over_seeds`. Every function takes and returns all
    seeds at once: each leaf of the runner state, of the metrics and of the levels has a leading [num_seeds] axis."""

    init: Callable  # rngs [S] -> runner state
    step: Callable  # runner state -> (runner state, metrics {key: [S, log_interval]}): one chunk of updates
    evaluate: Callable  # runner state -> held-out metrics {key: [S]}
    levels: Callable  # runner state -> (Level [S, n], {label: [S, n]}): the levels the pictures show, and numbers to
    # write under each (a replay buffer's scores, say; may be empty)
    train: Callable  # rngs [S] -> (runner state, (metrics, evaluations)): the whole run, pure (`whole_run`)
    student_updates: Callable  # runner state -> int [S]: student PPO updates taken (--total-student-updates)
    policies: Mapping[str, Callable]  # name -> (runner state -> parameters [S, ...]); "student" in every script
    placement: Placement  # the devices the functions were built for (common.devices.make_placement)
    one_seed: OneSeed  # the functions these batch


def over_seeds(
    config,
    placement: Placement,
    *,
    init: Callable,
    step: Callable,
    evaluate: Callable,
    levels: Callable,
    policies: Mapping[str, Callable],
    before_step: Callable | None = None,
) -> BatchedOverSeeds:
    """A script's one-seed functions (`init(rng)`, `step(runner)` for one chunk, `evaluate(runner)`, `levels(runner)`
    and the `policies`) over all seeds, and the pure run they make. `before_step`, if given, runs on all seeds at
    once before each chunk (SFL refreshes its buffer there, so one seed's refresh never costs the others). Every
    script's runner state counts its student updates in `student_updates`."""
    chunk = vmap_seeds(step)
    step_seeds = chunk if before_step is None else lambda runner: chunk(before_step(runner))
    init_seeds, evaluate_seeds = map_seeds(init), jax.vmap(evaluate)
    if config.run.init_from is not None and not config.run.resume:  # a resume restores its parameters
        init_seeds = starting_from(init_seeds, config.run)
    student_updates = operator.attrgetter("student_updates")
    return BatchedOverSeeds(
        init=init_seeds,
        step=step_seeds,
        evaluate=evaluate_seeds,
        levels=jax.vmap(levels),
        train=whole_run(config, init_seeds, step_seeds, evaluate_seeds, student_updates),
        student_updates=student_updates,
        policies=policies,
        placement=placement,
        one_seed=OneSeed(init, step, evaluate, levels, before_step),
    )


def starting_from(init_seeds: Callable, run: RunConfig) -> Callable:
    """`init_seeds` with every network's parameters taken from --init-from (common/init_from.py), read and checked
    here, before any run folder is made."""
    rngs = jax.ShapeDtypeStruct((run.num_seeds,), jax.random.key(0).dtype)
    parameters = read_parameters(Path(run.init_from), jax.eval_shape(init_seeds, rngs), run.num_seeds)
    return lambda rngs: with_parameters(init_seeds(rngs), parameters)


def chunks_before_stop(run: RunConfig, env_steps_per_update: int) -> int:
    """Chunks of --log-interval updates the driver runs before --total-updates or --total-env-steps stops it (it
    checks them before every chunk)."""
    chunks = run.total_updates // run.log_interval
    if run.total_env_steps is not None:
        chunks = min(chunks, -(-run.total_env_steps // (env_steps_per_update * run.log_interval)))
    return chunks


def whole_run(config, init: Callable, step: Callable, evaluate: Callable, student_updates: Callable) -> Callable:
    """The pure `train(rngs)` of the run the driver makes: `init`, then chunks of --log-interval updates (`step`),
    evaluating after each chunk that ends on a multiple of --eval-interval, until --total-updates, --total-env-steps
    or --total-student-updates stops it (checked before every chunk, as the driver does). Chunk by chunk the driver
    computes the same values bitwise. --train-seconds, a wall-clock limit, is refused when `train` is called.

    Returns (runner state, (metrics {key: [chunks, S, log_interval]}, evaluations {key: [evaluations, S]})) sized for
    the most chunks --total-updates and --total-env-steps allow; rows a --total-student-updates stop left unrun hold
    NaN (False, 0 where the metric is not a float)."""
    run = config.run
    num_chunks = chunks_before_stop(run, config.env_steps_per_update)
    chunks_per_evaluation = run.eval_interval // run.log_interval if run.eval_interval else 0
    num_evaluations = num_chunks // chunks_per_evaluation if chunks_per_evaluation else 0
    budget = run.total_student_updates

    def unrun(shapes, rows: int):
        def blank(shape):
            fill = jnp.nan if jnp.issubdtype(shape.dtype, jnp.floating) else 0
            return jnp.full((rows, *shape.shape), fill, shape.dtype)

        return jax.tree.map(blank, shapes)

    def train(rngs):
        if run.train_seconds is not None:
            raise ConfigError(
                f"train cannot stop on --train-seconds ({run.train_seconds}), a wall-clock limit; leave it unset, or "
                "run the script's command line"
            )
        runner = init(rngs)
        metrics = unrun(jax.eval_shape(step, runner)[1], num_chunks)
        evaluations = unrun(jax.eval_shape(evaluate, runner), num_evaluations)

        def going(carry):
            runner, done, _, _ = carry
            under_budget = True if budget is None else jnp.min(student_updates(runner)) < budget
            return (done < num_chunks) & under_budget

        def one_chunk(carry):
            runner, done, metrics, evaluations = carry
            runner, chunk_metrics = step(runner)
            metrics = jax.tree.map(lambda rows, row: rows.at[done].set(row), metrics, chunk_metrics)
            if num_evaluations:
                due = (done + 1) % chunks_per_evaluation == 0
                evaluated = jax.lax.cond(
                    due, evaluate, lambda runner: jax.tree.map(lambda rows: rows[0], evaluations), runner
                )
                slot = jnp.where(due, (done + 1) // chunks_per_evaluation - 1, num_evaluations)
                evaluations = jax.tree.map(
                    lambda rows, row: rows.at[slot].set(row, mode="drop"), evaluations, evaluated
                )
            return runner, done + 1, metrics, evaluations

        runner, _, metrics, evaluations = jax.lax.while_loop(going, one_chunk, (runner, 0, metrics, evaluations))
        return runner, (metrics, evaluations)

    return train


def check_config(config, script: str) -> None:
    """Raise a one-line ConfigError naming the first `CONFIG_PIECES` member `config` lacks or gets wrong."""
    for name, meaning in CONFIG_PIECES.items():
        if not hasattr(config, name):
            raise ConfigError(f"{script} breaks the driver contract: its Config does not declare {name} ({meaning})")
    steps, spans = config.env_steps_per_update, config.schedule_spans_run
    wrong = [
        (not isinstance(config.run, RunConfig), "run", config.run),
        (not isinstance(steps, int) or isinstance(steps, bool) or steps < 1, "env_steps_per_update", steps),
        (not isinstance(spans, bool), "schedule_spans_run", spans),
    ]
    for failed, name, value in wrong:
        if failed:
            raise ConfigError(
                f"{script} breaks the driver contract: its Config's {name} is {value!r}, not {CONFIG_PIECES[name]}"
            )


def check_functions(functions, script: str) -> BatchedOverSeeds:
    """`functions` (what `make_train` returned) if it is a `BatchedOverSeeds` with a "student" policy, else a one-line
    ConfigError."""
    if not isinstance(functions, BatchedOverSeeds) or not callable(functions.policies.get("student")):
        raise ConfigError(
            f"{script} breaks the driver contract: make_train must return common.contract.over_seeds(...) with a "
            f"'student' policy, not {type(functions).__name__}"
        )
    return functions


def check_health_metric(functions: BatchedOverSeeds, runner_shapes, script: str) -> None:
    """A one-line ConfigError if the step's metrics lack `FINITE_METRIC`, read by tracing it (no compile)."""
    if FINITE_METRIC not in jax.eval_shape(functions.step, runner_shapes)[1]:
        raise ConfigError(f"{script} breaks the driver contract: its step's metrics have no {FINITE_METRIC}")


def all_finite(tree) -> jax.Array:
    """True when every leaf of `tree` (losses, parameters) is finite: the value of `FINITE_METRIC`."""
    return jnp.all(jnp.array([jnp.isfinite(leaf).all() for leaf in jax.tree.leaves(tree)]))
