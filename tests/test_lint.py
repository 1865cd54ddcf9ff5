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


def test_the_formatter_is_obeyed_everywhere():
    """No code is kept out of ``ruff format`` (issue 31): no skip markers."""
    marked = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in ROOT.rglob("*.py")
        if ".git" not in path.parts
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "# fmt: " + "skip" in line or "# fmt: " + "off" in line
    ]
    assert marked == []
