"""Shared test fixtures: the reference data recorded from minimax-lib 0.2.0, kept in tests/fixtures/ (how it was
recorded: tests/fixtures/README.md). AMAZE_FIXTURE points the parity tests at another recording."""

import collections
import json
import os
import signal
import tempfile
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# One persistent compilation cache for the session, this process and the scripts it starts: the tests compile
# the same tiny programs many times (a run, its resume, the evaluate command), and XLA's CPU compiles dominate
# the suite's time. Set before JAX is imported; a cache hit returns the same executable, so results are equal.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", tempfile.mkdtemp(prefix="cleanued-test-xla-cache-"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
# Most of an XLA CPU compile is making machine code, which a test's tiny program then runs for milliseconds: the
# tests compile without LLVM's optimising passes (the suite 1876 s -> 1267 s on 2 cores) and emit fusions with XLA's
# older elemental emitter rather than its MLIR fusion emitters (a training chunk's compile 6.1 s -> 2.9 s). Both
# keep the operations each program runs, but the older emitter expands a few ops into extra loops of known trip count
# and can round a float otherwise in one program than in another that holds the same step (one in a few thousand,
# train's loop against the step alone). So tests/test_train_functions.py, which compares those two bitwise, compiles
# with the emitters (SCRIPTS_FUSION_EMITTERS); every other bitwise comparison holds either way, and the loops that
# tests/test_hlo_loops.py looks for are there either way (the extra ones all have a known trip count).
# CLEANUED_TESTS_OPTIMIZED=1 compiles every test as the scripts do.
FUSION_EMITTERS_FLAG = "--xla_cpu_use_fusion_emitters"
FAST_COMPILE = " ".join(
    ("--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true", f"{FUSION_EMITTERS_FLAG}=false")
)
if not os.environ.get("CLEANUED_TESTS_OPTIMIZED") and FAST_COMPILE not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip()
SCRIPTS_FUSION_EMITTERS = {FUSION_EMITTERS_FLAG.removeprefix("--"): True}
"""`compiler_options=SCRIPTS_FUSION_EMITTERS` (to `jax.jit` or `.compile`): fusions emitted as the scripts' compiles
emit them, for a test that compares two programs bitwise."""
OPTIMIZED_COMPILE = {
    "xla_backend_optimization_level": 3,
    "xla_llvm_disable_expensive_passes": False,
    **SCRIPTS_FUSION_EMITTERS,
}
"""`jax.jit(..., compiler_options=OPTIMIZED_COMPILE)`: compiled as the scripts compile, for one program a test runs
long enough (hundreds of calls on thousands of slots) that unoptimised machine code would cost more than the faster
compile saves."""


def environment_with_fusion_emitters() -> dict:
    """This process's environment for a process that compiles with XLA's fusion emitters: an older JAX (minimax's
    0.4.31, JaxUED's 0.4.30), whose XLA aborts on a flag it does not know, or a program too large for the older emitter
    (a scatter of over 2**31 indices)."""
    kept = [flag for flag in os.environ.get("XLA_FLAGS", "").split() if not flag.startswith(f"{FUSION_EMITTERS_FLAG}=")]
    return {**os.environ, "XLA_FLAGS": " ".join(kept)}


@pytest.fixture(autouse=True)
def signal_handlers_kept():
    """Fails a test that leaves Ctrl+C's or SIGTERM's handler otherwise than it found it, and puts the handler
    back: a test after it in the same worker would inherit the change, and a child it starts inherits an ignored
    signal (three run-stage tests whose stand-in for minimax could not be stopped failed so in CI)."""
    found = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    changed = [sig for sig, handler in found.items() if signal.getsignal(sig) != handler]
    for sig in changed:
        signal.signal(sig, found[sig])
    if changed:
        pytest.fail(f"the test left the handler of {', '.join(sig.name for sig in changed)} changed", pytrace=False)


@pytest.fixture(scope="session")
def amaze_fixture():
    path = Path(os.environ.get("AMAZE_FIXTURE", FIXTURES / "amaze_minimax_seed0.npz"))
    if not path.exists():
        pytest.fail(f"AMaze reference fixture not found at {path} (AMAZE_FIXTURE overrides tests/fixtures/)")
    return dict(np.load(path))


@pytest.fixture(scope="session")
def heldout_json():
    return json.loads((FIXTURES / "heldout_mazes.json").read_text())


SECONDS_PER_FILE = "cleanued/seconds_per_file"
"""pytest's cache key for how long each test file took when it last ran (setup, call and teardown summed)."""


def pytest_collection_modifyitems(config, items):
    """Test files in the order of their last run's time, longest first (files never timed by their number of tests,
    as pytest-xdist orders them): each worker takes the next file when it is almost done with its own (`--dist
    loadfile`, `--no-loadscope-reorder`), and a long file started last would leave the other worker idle."""
    seconds = config.cache.get(SECONDS_PER_FILE, {}) if getattr(config, "cache", None) else {}
    tests_per_file = collections.Counter(file_of(item.nodeid) for item in items)
    items.sort(key=lambda item: (-seconds.get(file_of(item.nodeid), 0.0), -tests_per_file[file_of(item.nodeid)]))


def file_of(nodeid: str) -> str:
    return nodeid.split("::")[0]


def pytest_runtest_logreport(report):
    _file_seconds[file_of(report.nodeid)] += report.duration


def pytest_sessionfinish(session):
    config = session.config
    if hasattr(config, "workerinput") or not getattr(config, "cache", None) or not _file_seconds:
        return  # a worker's reports also reach the controller, which keeps them
    config.cache.set(SECONDS_PER_FILE, {**config.cache.get(SECONDS_PER_FILE, {}), **_file_seconds})


_file_seconds = collections.Counter()
