"""MkDocs hook: the settings reference, generated from ``settings/defaults.py``.

Every default the add-on applies is read from the module (its value) and from its
source (the comment above it, and the ``# --- Section ---`` it sits in), so the
reference and the defaults cannot disagree.
"""

from __future__ import annotations

import pprint
import re
from pathlib import Path
from typing import Any

MARKER = "<!-- settings-reference -->"
SOURCE = Path(__file__).resolve().parents[1] / "settings" / "defaults.py"
ASSIGNMENT = re.compile(r"^([A-Z][A-Z0-9_]+) = ")
SECTION = re.compile(r"^# --- (.+?) -+$")


def blocks(source: str) -> list[tuple[str, list[str], str]]:
    """(section, names, comment) for each group of settings, in the file's order."""
    found: list[tuple[str, list[str], str]] = []
    section, comment, names = "General", [], []
    for line in source.splitlines():
        if match := SECTION.match(line):
            section = match.group(1)
            comment, names = [], []
        elif line.startswith("#"):
            if names:  # a new comment after a group: the group is done
                comment, names = [], []
            comment.append(line.lstrip("#").strip())
        elif match := ASSIGNMENT.match(line):
            if names and found and found[-1][1] is names:
                names.append(match.group(1))
            else:
                names = [match.group(1)]
                found.append((section, names, " ".join(comment)))
    return found


def reference() -> str:
    from webcrawl.settings import defaults

    source = SOURCE.read_text()
    # read from the environment: show how, never this machine's value (a secret)
    from_environment = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^([A-Z][A-Z0-9_]+) = (.*environ.*)$", source, re.MULTILINE)
    }
    out, current = [], None
    for section, names, comment in blocks(source):
        if section != current:
            out.append(f"\n### {section}\n")
            current = section
        long = []
        for name in names:
            if name in from_environment:
                out.append(f"`{name}` = `{from_environment[name]}`  ")
                continue
            value = getattr(defaults, name)
            text = repr(value)
            if len(text) <= 60:
                out.append(f"`{name}` = `{text}`  ")
            else:
                out.append(f"`{name}`: see below  ")
                shown = pprint.pformat(value, width=88, sort_dicts=False)
                long.append(f"```python\n{name} = {shown}\n```\n")
        out.append(f"{comment}\n")
        out.extend(long)
    return "\n".join(out)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return markdown.replace(MARKER, reference()) if MARKER in markdown else markdown
