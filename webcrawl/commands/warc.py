"""``webcrawl warc repair [PATH ...]``: close the WARC files a killed worker left open.

A worker killed mid-write leaves ``*.warc.gz.open`` ending in an incomplete record; the
next worker that starts on the same ``WARC_DIR`` repairs them itself.  This does it by
hand: each file is cut after its last whole record, indexed again, and renamed to its
closed name.  A file a worker still writes (it holds the file's lock) is left alone.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scrapy.settings import Settings

from webcrawl.warc.files import OPEN, WARC_SUFFIX, WriterAlive, repair

HELP = "repair WARC files a killed worker left open"
CRAWL_OPTIONS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["repair"])
    parser.add_argument(
        "paths", nargs="*", type=Path, help="files or directories (default: WARC_DIR)"
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl.pipelines.warc import warc_dir

    paths = args.paths or [warc_dir(settings)]
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(path.glob(f"*{WARC_SUFFIX}{OPEN}"))
        elif path.name.endswith(WARC_SUFFIX + OPEN) and path.is_file():
            files.append(path)
        else:
            print(f"webcrawl warc: not an open WARC file or a directory: {path}", file=sys.stderr)
            return 2
    status = 0
    for path in files:
        try:
            closed, kept, cut = repair(path)
        except WriterAlive:
            print(f"skipped {path}: a worker is writing it")
            continue
        except FileNotFoundError:
            continue  # repaired meanwhile (by a worker starting)
        except OSError as exc:
            print(f"webcrawl warc: cannot repair {path}: {exc}", file=sys.stderr)
            status = 1
            continue
        print(f"repaired {closed}: {kept} records kept, {cut} bytes cut off")
    if not files:
        print(f"no open WARC files in {', '.join(str(p) for p in paths)}")
    return status
