"""ruff, as configured in pyproject.toml, is clean."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]])
def test_ruff(args):
    ruff = shutil.which("ruff")
    assert ruff, "ruff is a test dependency: pip install -e '.[test]'"
    result = subprocess.run([ruff, *args], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
