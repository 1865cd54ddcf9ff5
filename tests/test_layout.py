"""The layout's promise: the policies import no Scrapy and no network client."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_policies_import_no_scrapy_and_no_network_client():
    """(The Page item, and so change detection, goes through itemadapter, which imports
    Scrapy when it is installed: that is itemadapter's doing, not a dependency of ours.)"""
    code = (
        "import sys\n"
        "import webcrawl.incremental.simhash, webcrawl.incremental.revisit_sim\n"
        "import webcrawl.failpath, webcrawl.urls.scope, webcrawl.urls.seeds\n"
        "import webcrawl.frontier.adaptive_delay, webcrawl.extract, webcrawl.links\n"
        "import webcrawl.safety.addresses, webcrawl.safety.traps, webcrawl.safety.policy\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('scrapy', 'twisted', 'redis', 'happybase'))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_one_installed_package_and_every_folder_of_it_listed():
    """pip installs webcrawl alone: spiders/, middlewares/, pipelines/ and settings/ of the
    repository go inside it (package-dir), and a new folder is not forgotten."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = config["packages"]
    assert all(p == "webcrawl" or p.startswith("webcrawl.") for p in packages)
    mapped = config["package-dir"]
    folders = {str(p.parent.relative_to(ROOT)) for p in (ROOT / "webcrawl").rglob("__init__.py")}
    folders |= {f for f in mapped.values() if (ROOT / f / "__init__.py").is_file()}
    listed = {mapped.get(p, p.replace(".", "/")) for p in packages}
    assert listed == folders
