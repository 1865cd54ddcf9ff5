"""The docs site builds with warnings as errors, its settings reference is the defaults
module's, and its runnable shell examples run."""

import importlib.util
import re
import subprocess
import sys

import pytest
from conftest import ROOT, crawl_env

from webcrawl.settings import defaults

PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
# ```shell blocks run on one machine; ```sh blocks are for reading (hosts, clusters)
RUNNABLE = re.compile(r"^```shell\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_the_docs_build_with_warnings_as_errors(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    settings = (tmp_path / "site" / "settings" / "index.html").read_text()
    assert "FRONTIER_HOST_DELAY" in settings


def test_the_settings_reference_is_the_defaults_module(monkeypatch):
    monkeypatch.setenv("WEBCRAWL_SECRET", "never-shown")
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    reference = hooks.reference()
    names = [n for n in dir(defaults) if n.isupper()]
    assert names and all(f"`{name}`" in reference for name in names)
    assert "never-shown" not in reference  # an environment's value is never printed
    page = hooks.on_page_markdown("# Settings\n\n" + hooks.MARKER + "\n")
    assert "### Shared frontier" in page and hooks.MARKER not in page


EXAMPLES = [
    pytest.param(block, id=f"{page.name}:{n}")
    for page in PAGES
    for n, block in enumerate(RUNNABLE.findall(page.read_text()))
]


def test_there_are_runnable_examples():
    assert EXAMPLES


@pytest.mark.e2e
@pytest.mark.parametrize("script", EXAMPLES)
def test_a_shell_example_runs(script, tmp_path):
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=crawl_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
