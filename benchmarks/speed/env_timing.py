"""The env-only timing protocol, shared by AMaze's benchmark (benchmarks/speed/bench_env.py) and the peers' env
workers (minimax_env_worker.py, jaxued_env_worker.py, gridworlds_env_worker.py): the AOT compile of a jitted rollout
timed apart, one warm-up call, then the median of the timed calls, each waited for with `block_until_ready`.

The workers run with a peer's own Python (minimax's jax 0.4.31, the jaxued wheel's 0.4.30, or the project's jax), so
this file imports only jax and the standard library, and they import it from their own folder.
"""

import os
import platform
import statistics
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any, NamedTuple

import jax


class Timing(NamedTuple):
    compile_s: float
    """Seconds of `lower().compile()`."""
    steady_s: float
    """Median seconds of one timed call."""
    outputs: list[Any]
    """What each timed call returned, in order."""

    def report(self, num_envs: int, num_steps: int) -> dict:
        """The JSON fields every env benchmark prints and the side-by-side tables read."""
        return {
            "num_envs": num_envs,
            "num_steps": num_steps,
            "compile_s": round(self.compile_s, 3),
            "steady_s": round(self.steady_s, 4),
            "env_steps_per_s": round(num_envs * num_steps / self.steady_s),
        }


def time_rollout(rollout, make_key: Callable[[int], Any], repeats: int) -> Timing:
    """Time `rollout`, a jitted function of one key: compile it for `make_key(0)`, call it once on that key to warm
    up, then time `repeats` calls on `make_key(1)`, `make_key(2)`, ... (`make_key` is `jax.random.key` or, for the
    peers' code that wants raw keys, `jax.random.PRNGKey`)."""
    key = make_key(0)
    started = time.perf_counter()
    compiled = rollout.lower(key).compile()
    compile_s = time.perf_counter() - started
    jax.block_until_ready(compiled(key))
    durations, outputs = [], []
    for repeat in range(1, repeats + 1):
        started = time.perf_counter()
        outputs.append(jax.block_until_ready(compiled(make_key(repeat))))
        durations.append(time.perf_counter() - started)
    return Timing(compile_s, statistics.median(durations), outputs)


def describe_peer(package: str) -> dict:
    """The device, Python and versions of the peer `package` and of the jax it runs on."""
    return {
        "device": str(jax.devices()[0].device_kind),
        "python": platform.python_version(),
        "versions": {name: metadata.version(name) for name in (package, "jax", "jaxlib")},
        "cpu_count": os.cpu_count(),
    }
