"""pywb and cdxj-indexer, the replay and index tools the WARC tests check against.

pywb 2.10 pins ``redis==2.10.6`` (and installs ``brotlipy``, whose ``brotli`` module
shadows Brotli's), which would break webcrawl's own environment: so it lives in a venv of
its own, made once (``~/.cache/webcrawl-pywb``, or ``$WEBCRAWL_PYWB_VENV``) and reused.
``.ci/run`` makes it before the tests, so that no test's time limit pays for it.

    python -m tests.support.pywb      # make it (if missing) and print its bin directory
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PACKAGES = ("pywb==2.10.0", "cdxj-indexer==1.5.0")


def venv() -> Path:
    """The venv's directory, made if it does not hold pywb yet."""
    root = Path(os.environ.get("WEBCRAWL_PYWB_VENV") or Path.home() / ".cache" / "webcrawl-pywb")
    if not (root / "bin" / "wayback").exists() or not (root / "bin" / "cdxj-indexer").exists():
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
        subprocess.run(
            [str(root / "bin" / "pip"), "install", "-q", *PACKAGES], check=True, timeout=900
        )
    return root


def tool(name: str) -> str:
    """The path of one of the venv's commands (``wayback``, ``wb-manager``, ...)."""
    return str(venv() / "bin" / name)


if __name__ == "__main__":
    print(venv() / "bin")
