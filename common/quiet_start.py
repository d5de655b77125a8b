"""Imported first by every algos/ script: run from the command line (`python algos/dr.py`), Ctrl+C while the
script's libraries load (a few seconds) ends it at once and quietly, exit status 130. Nothing is written by then,
and an exception raised inside a native module's import can abort the interpreter; the driver installs its own
handler before it writes anything. Imported any other way (a test, `common.evaluate` loading a script) it does
nothing."""

import os
import signal
import sys
from pathlib import Path

_main_file = getattr(sys.modules.get("__main__"), "__file__", None)
if _main_file is not None and Path(_main_file).resolve().parent == Path(__file__).resolve().parents[1] / "algos":
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))
