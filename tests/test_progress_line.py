"""What a run prints while it trains: the progress line is rewritten in place on a terminal, and the held-out
results of each evaluation stay on the screen on a line of their own."""

import io
import sys
import types

import pytest

from common import runs
from common.runs import RunLog


def screen(output: str) -> list[str]:
    """The lines a terminal keeps of `output`: a carriage return goes back to the line's start, and the
    erase-to-end code after it leaves only what is written next."""
    return [line.split("\r")[-1].replace("\033[K", "") for line in output.split("\n")]


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_evaluation_results_stay_on_screen(tmp_path, capsys, terminal):
    config = types.SimpleNamespace(run=types.SimpleNamespace(track=False, total_updates=30, eval_episodes=10, sweep=()))
    columns = ["train/return", "eval/return/SixteenRooms", "eval/solve_rate/SixteenRooms"]
    log = RunLog(config, tmp_path, columns, 0, ("train/return", "eval/solve_rate/SixteenRooms"), None)
    log.progress.interactive = terminal

    def write(update: int, values: dict[str, list[float]]) -> None:  # values: {column: [value of each seed]}
        rows = [
            {"seed": seed, "update": update, **{key: per_seed[seed] for key, per_seed in values.items()}}
            for seed in range(2)
        ]
        log.write(rows, 1000.0)

    write(10, {"train/return": [0.1, 0.1]})
    evaluation = {"eval/return/SixteenRooms": [0.1, 0.3], "eval/solve_rate/SixteenRooms": [0.2, 0.4]}
    write(20, {"train/return": [0.2, 0.4], **evaluation})
    write(30, {"train/return": [0.5, 0.5]})
    log.close()
    printed = capsys.readouterr().err
    kept = screen(printed)
    (results,) = [line for line in kept if "eval/return/SixteenRooms" in line]
    assert results == (
        f"update 20, held-out evaluation ({config.run.eval_episodes} episodes a maze and seed, mean of 2 seeds; "
        "common.evaluate for a larger sample): eval/solve_rate/SixteenRooms 0.300 | eval/return/SixteenRooms 0.200"
    )
    assert kept[-2].startswith("update 30/30 |") and "train/return 0.500" in kept[-2]
    assert len([line for line in kept if line.startswith("update ") and "/30 |" in line]) == (1 if terminal else 3)
    # A log file (nohup, a pipe) gets plain lines: no carriage return or erase code, which only a terminal reads.
    assert terminal or ("\r" not in printed and "\033" not in printed)


class Stderr(io.StringIO):
    """A stand-in for sys.stderr that keeps what had been written at each flush."""

    def __init__(self, terminal: bool):
        super().__init__()
        self.terminal, self.flushed = terminal, []

    def isatty(self) -> bool:
        return self.terminal

    def flush(self) -> None:
        self.flushed.append(self.getvalue())


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_the_eta_is_the_time_per_update_so_far_times_the_updates_left(monkeypatch, terminal):
    """The line's bytes for a run resumed at update 2 of 10: no ETA before an update is done, then the seconds per
    update since the start times the updates left, in hours, minutes and seconds; on a terminal each line is
    rewritten in place (flushed at once: it has no newline) and `close` ends it with a newline. Fails with the
    elapsed time, the updates done or the ETA's condition or units changed, the terminal not detected, a line left
    unflushed, or the closing newline sent elsewhere (mutmut's survivors of Progress and _duration)."""
    clock = iter([100.0, 104.0, 1345.0])  # the start, then each show
    monkeypatch.setattr(runs.time, "perf_counter", lambda: next(clock))
    stderr = Stderr(terminal)
    monkeypatch.setattr(sys, "stderr", stderr)
    progress = runs.Progress(total_updates=10, start_update=2)
    progress.show(2, 0.0, {})
    progress.show(4, 1000.0, {"train/return": 0.5, "eval/solve_rate/SixteenRooms": float("nan")})
    progress.close()
    lines = [
        "update 2/10 | 0 env steps/s | ETA ?",
        "update 4/10 | 1,000 env steps/s | ETA 1:02:15 | train/return 0.500",  # 1,245 s / 2 updates x 6 left
    ]
    shown = [f"\r{line}\033[K" if terminal else f"{line}\n" for line in lines]
    assert stderr.getvalue() == "".join(shown) + ("\n" if terminal else "")
    assert stderr.flushed == [shown[0], shown[0] + shown[1]]


@pytest.mark.parametrize(
    ("points", "seeds", "averaged"),
    [(2, 3, "2 points x 3 seeds"), (2, 1, "2 points x 1 seeds"), (None, 1, "1 seeds")],
    ids=["sweep", "sweep-one-seed", "one-seed"],
)
def test_the_evaluation_line_says_how_many_points_and_seeds_it_averages(tmp_path, capsys, points, seeds, averaged):
    """The held-out line counts a sweep's points and seeds from its last row, and a run's seeds from its rows.
    Fails with either count read from another row or shifted, or the point column looked up elsewhere (mutmut's
    survivors of RunLog.write 32-48)."""
    sweep = ("lr=1e-4,3e-4",) if points else ()
    config = types.SimpleNamespace(
        run=types.SimpleNamespace(track=False, total_updates=30, eval_episodes=10, sweep=sweep)
    )
    headline = ("eval/solve_rate/SixteenRooms",)
    log = RunLog(config, tmp_path, list(headline), 0, headline, None)
    log.progress.interactive = False
    rows = [
        {**({"point": point} if points else {}), "seed": seed, "update": 10, headline[0]: 0.5}
        for point in range(points or 1)
        for seed in range(seeds)
    ]
    log.write(rows, 1.0)
    assert f"(10 episodes a maze and seed, mean of {averaged}; common.evaluate" in capsys.readouterr().err
