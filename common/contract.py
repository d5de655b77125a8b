"""What an algos/ script owes the driver (common/driver.py) and the evaluator (common/evaluate.py), declared once.

A script is a module with `Config`, `make_train(config)` and `HEADLINE_METRICS`, ending in
`driver.main(Config, make_train, __doc__, __file__, HEADLINE_METRICS)`. The driver needs three kinds of facts
from it, and this file is the only place they are named:

- **The config declares** (`ScriptConfig`): its `run` settings, how many env steps one update takes per seed
  (the student's and, where the method has them, the teacher's or the scoring rollouts'), and whether a
  schedule is laid over the run's length (learning-rate annealing), which a resume must then keep.
- **`make_train(config)` returns** `BatchedOverSeeds`: the functions over all seeds, the placement they were
  built for (the driver places and compiles with it, so it is built once), the student-update counter the
  papers budget, and the policies a run holds for `common.evaluate --policy`.
- **Every chunk's metrics** carry `FINITE_METRIC`, one boolean per update (`all_finite` of the losses and
  parameters); the driver stops on a False and does not log it.

`check_config` and `check_functions` run when the driver starts, before anything compiles: a script missing a
piece fails in one line naming it.
"""

from collections.abc import Callable, Mapping
from typing import NamedTuple, Protocol

import jax
import jax.numpy as jnp

from common.config import RunConfig
from common.devices import Placement
from common.errors import ConfigError

FINITE_METRIC = "health/finite"
"""Metric key of the per-update health check the driver stops on."""


class ScriptConfig(Protocol):
    """What the driver reads from a script's `Config` besides its own flags."""

    run: RunConfig

    @property
    def env_steps_per_update(self) -> int:
        """Env steps one update takes per seed: the unit of --total-env-steps, logs.csv's env_steps and sps."""
        ...

    @property
    def schedule_spans_run(self) -> bool:
        """A schedule is laid over --total-updates / --total-student-updates, so a resume must keep them."""
        ...


CONFIG_PIECES = {
    "run": "the run settings, a common.config.RunConfig",
    "env_steps_per_update": "env steps one update takes per seed, a positive int",
    "schedule_spans_run": "whether a schedule spans the run's length, a bool",
}
"""The `ScriptConfig` members and what each must be, for the error that names a missing one."""


class BatchedOverSeeds(NamedTuple):
    """What a script's `make_train(config)` returns. Every function takes and returns all seeds at once: each
    leaf of the runner state, of the metrics and of the levels has a leading [num_seeds] axis. Every member is
    required; each defaults to None only so that `check_functions` can name the one a script left out."""

    init: Callable = None  # rngs [S] -> runner state
    step: Callable = None  # runner state -> (runner state, metrics {key: [S, log_interval]}): one chunk of updates
    evaluate: Callable = None  # runner state -> held-out metrics {key: [S]}
    levels: Callable = None  # runner state -> (Level [S, n], {label: [S, n]}): the levels the pictures show, and
    # numbers to write under each (a replay buffer's scores, say; may be empty)
    train: Callable = None  # rngs [S] -> (runner state, (metrics, eval metrics)): the whole run, pure
    student_updates: Callable = None  # runner state -> int [S]: student PPO updates taken (--total-student-updates)
    policies: Mapping[str, Callable] = None  # name -> (runner state -> parameters [S, ...]); "student" in every script
    placement: Placement = None  # the devices the functions were built for (common.devices.make_placement)


FUNCTION_PIECES = {
    "init": "rngs -> runner state",
    "step": "runner state -> (runner state, metrics): one chunk",
    "evaluate": "runner state -> held-out metrics",
    "levels": "runner state -> (levels, labels) for the pictures",
    "train": "rngs -> the whole run",
    "student_updates": "runner state -> student updates per seed",
}
"""The callable `BatchedOverSeeds` members and what each maps, for the error that names a missing one."""


def check_config(config: ScriptConfig, script: str) -> None:
    """Raise a one-line ConfigError naming the first `ScriptConfig` piece `config` lacks or gets wrong."""
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
    """`functions` (what `make_train` returned) if it keeps the contract, else a one-line ConfigError naming the
    first piece missing."""
    if not isinstance(functions, BatchedOverSeeds):
        raise ConfigError(
            f"{script} breaks the driver contract: make_train returned a {type(functions).__name__}, not a "
            "common.contract.BatchedOverSeeds"
        )
    for name, meaning in FUNCTION_PIECES.items():
        if not callable(getattr(functions, name)):
            raise ConfigError(f"{script} breaks the driver contract: make_train gave no {name} ({meaning})")
    policies = functions.policies
    if not isinstance(policies, Mapping) or not callable(policies.get("student")):
        raise ConfigError(
            f"{script} breaks the driver contract: make_train's policies are not a mapping from names to "
            "functions of the runner state with a 'student'"
        )
    if not isinstance(functions.placement, Placement):
        raise ConfigError(
            f"{script} breaks the driver contract: make_train gave no placement (common.devices.make_placement)"
        )
    return functions


def all_finite(tree) -> jax.Array:
    """True when every leaf of `tree` (losses, parameters) is finite: the value of `FINITE_METRIC`."""
    return jnp.all(jnp.array([jnp.isfinite(leaf).all() for leaf in jax.tree.leaves(tree)]))
