"""`pip install -e .` works: the project builds as a package whose algos/, common/ and envs/ import from any
directory (checked on the built wheel, offline, without installing it)."""

import subprocess
import sys
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_the_package_imports_from_anywhere(tmp_path):
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path)]
    subprocess.run([*build, str(REPO_ROOT)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("cleanued-*.whl")
    installed = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(installed)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = "from envs.maze import reset_to_level\nfrom common.config import with_flags\nfrom algos import dr\n"
    result = subprocess.run(
        [sys.executable, "-c", code + "print(dr.__file__)"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(installed)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(installed / "algos" / "dr.py")
