"""common/quiet_start.py and common/errors.py, the two smallest common modules: which main files make Ctrl+C end the
process at once with status 130 (a script of algos/, however its path was given, and nothing else), and the error
types bad input raises, reported in one line with status 2 whichever of them it is. The module's body runs again here
under a stand-in `__main__`; every signal handler is put back after each test."""

import importlib
import os
import signal
import sys
import types
from pathlib import Path

import pytest

import common.quiet_start
from common.errors import ConfigError, DoesNotFit
from common.runs import one_line_errors

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def run_with_main(monkeypatch):
    """Runs quiet_start's body again as if `__main__` had the given file (None: no file, as in `python -c`), and
    returns the SIGINT handler it leaves; the handler that was there before is restored afterwards."""
    before = signal.getsignal(signal.SIGINT)

    def run(main_file):
        main = types.ModuleType("__main__")
        if main_file is not None:
            main.__file__ = str(main_file)
        monkeypatch.setitem(sys.modules, "__main__", main)
        importlib.reload(common.quiet_start)
        return signal.getsignal(signal.SIGINT)

    yield run
    signal.signal(signal.SIGINT, before)


def test_a_script_of_algos_ends_on_ctrl_c_at_once_with_status_130(run_with_main, monkeypatch):
    """The handler exits with os._exit (no traceback, no cleanup that could block) and status 130, the shell's code
    for an interrupt. Mutation checked by hand: exiting with status 1 fails this test."""
    before = signal.getsignal(signal.SIGINT)
    handler = run_with_main(REPO_ROOT / "algos" / "dr.py")
    assert handler is not before and callable(handler)
    exits = []
    monkeypatch.setattr(os, "_exit", exits.append)
    handler(signal.SIGINT, None)
    assert exits == [130]


def test_a_relative_path_to_a_script_of_algos_counts_as_the_same_folder(run_with_main, monkeypatch):
    """`python algos/dr.py` from the repository root gives a relative `__file__`. Mutation checked by hand: comparing
    the path unresolved fails this test."""
    monkeypatch.chdir(REPO_ROOT)
    before = signal.getsignal(signal.SIGINT)
    assert run_with_main(Path("algos") / "dr.py") is not before


@pytest.mark.parametrize(
    "main_file",
    [None, REPO_ROOT / "benchmarks" / "speed" / "bench_algos.py", REPO_ROOT / "algos", Path("/elsewhere/algos/dr.py")],
    ids=["no file", "another folder of the repository", "the folder itself", "another folder named algos"],
)
def test_any_other_main_file_leaves_ctrl_c_alone(run_with_main, main_file):
    before = signal.getsignal(signal.SIGINT)
    assert run_with_main(main_file) is before


@pytest.mark.parametrize("error", [ConfigError("bad --num-envs"), DoesNotFit("bad --num-envs")])
def test_bad_input_of_either_kind_is_one_line_and_status_2(error, capsys):
    """A run too large for its machine is bad input like any other: one line, status 2, no traceback; neither is a
    ValueError, which tyro would wrap in a usage box. Mutation checked by hand: DoesNotFit derived from Exception
    fails this test."""
    with pytest.raises(SystemExit) as exit_info, one_line_errors():
        raise error
    assert exit_info.value.code == 2 and capsys.readouterr().err == "error: bad --num-envs\n"
    assert not isinstance(error, ValueError)
