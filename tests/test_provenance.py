"""common/provenance.py: the commit a result names, marked dirty by uncommitted changes to tracked files only, and
"unknown" outside a repository; the device line counts the devices. Mutation checked by hand: with `+dirty`,
`-uno` or the return-code check dropped, or the count left out of the device line, a test fails."""

import subprocess

import jax

from common import provenance


def git(repo, *args: str) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_the_commit_is_marked_dirty_by_changes_to_tracked_files_only(tmp_path, monkeypatch):
    # The machine's git settings (signing, a repository above the temporary folder) must not decide the outcome.
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert provenance.git_commit(tmp_path) == "unknown"  # not a repository
    git(tmp_path, "init", "-q")
    (tmp_path / "tracked.txt").write_text("one")
    git(tmp_path, "add", "tracked.txt")
    git(tmp_path, "commit", "-q", "-m", "first")
    commit = git(tmp_path, "rev-parse", "--short", "HEAD")
    assert provenance.git_commit(tmp_path) == commit
    (tmp_path / "untracked.txt").write_text("a result written beside the code")
    assert provenance.git_commit(tmp_path) == commit
    (tmp_path / "tracked.txt").write_text("two")
    assert provenance.git_commit(tmp_path) == f"{commit}+dirty"


def test_the_device_line_counts_the_devices():
    devices = jax.devices()
    described = provenance.describe_environment()
    assert described["device"] == f"{len(devices)}x {devices[0].device_kind} ({devices[0].platform})"
    assert set(provenance.PACKAGES) <= described.keys() and described["commit"] == provenance.git_commit()
