"""``webcrawl deploy``: from this checkout to N running workers on scrapyd, in one command.

    webcrawl deploy --workers 4 --seeds seeds.txt -s REDIS_URL=redis://redis:6379/0
    webcrawl deploy local prod --workers 2          # targets from scrapy.cfg
    webcrawl deploy --url http://10.0.0.5:6800/ --workers 8

It builds the project's egg the way ``scrapyd-deploy`` does (a generated
``setup.py`` with the ``scrapy`` settings entry point, ``bdist_egg``), but in
a temporary copy so the checkout is left untouched; uploads it to every
target (``addversion.json``); then starts ``--workers`` ``web`` jobs on each
(``schedule.json``) with the given ``-s`` settings.  The first job of the
first target gets the seeds; every worker shares the crawl through
``REDIS_URL``, which a multi-worker deployment needs (scrapyd jobs on one
machine could share an embedded Redis, but jobs on several cannot).
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from scrapy.utils.conf import closest_scrapy_cfg, get_config

# the packages pyproject.toml installs, and the folders of the repository it maps into
# webcrawl's namespace (a test checks both against pyproject.toml)
PACKAGES = (
    "webcrawl",
    "webcrawl.bench",
    "webcrawl.commands",
    "webcrawl.demo",
    "webcrawl.extensions",
    "webcrawl.failpath",
    "webcrawl.frontier",
    "webcrawl.handlers",
    "webcrawl.incremental",
    "webcrawl.localhbase",
    "webcrawl.monitor",
    "webcrawl.safety",
    "webcrawl.sitemaps",
    "webcrawl.store",
    "webcrawl.urls",
    "webcrawl.warc",
    "webcrawl.middlewares",
    "webcrawl.pipelines",
    "webcrawl.settings",
    "webcrawl.spiders",
)
PACKAGE_DIR = {
    "webcrawl.middlewares": "middlewares",
    "webcrawl.pipelines": "pipelines",
    "webcrawl.settings": "settings",
    "webcrawl.spiders": "spiders",
}
# files other than modules the packages need (pyproject.toml's package-data; a test checks)
PACKAGE_DATA = {
    "webcrawl.localhbase": ["pom.xml", "log4j2.properties"],
    "webcrawl.monitor": ["static/*"],
    "webcrawl.frontier": ["lua/*.lua"],
}
SETUP_PY = """\
from setuptools import setup

setup(
    name="webcrawl",
    version="{version}",
    packages={packages!r},
    package_dir={package_dir!r},
    package_data={package_data!r},
    entry_points={{"scrapy": ["settings = {settings}"]}},
)
"""


@dataclass(frozen=True)
class Target:
    name: str
    url: str
    project: str = "webcrawl"
    username: str | None = None
    password: str | None = None

    def endpoint(self, name: str) -> str:
        return self.url.rstrip("/") + "/" + name


def targets_from_config(names: list[str]) -> list[Target]:
    """``[deploy]`` / ``[deploy:NAME]`` sections of scrapy.cfg (all of them if no names)."""
    config = get_config()
    found = {}
    for section in config.sections():
        if section == "deploy" or section.startswith("deploy:"):
            name = section.partition(":")[2] or "default"
            options = dict(config.items(section))
            if "url" not in options:
                raise ValueError(f"scrapy.cfg [{section}] has no url")
            found[name] = Target(
                name,
                options["url"],
                options.get("project", "webcrawl"),
                options.get("username"),
                options.get("password"),
            )
    if names:
        missing = [n for n in names if n not in found]
        if missing:
            raise ValueError(f"no [deploy:{missing[0]}] in scrapy.cfg (have: {', '.join(found)})")
        return [found[n] for n in names]
    if not found:
        raise ValueError("no [deploy] target in scrapy.cfg; give --url")
    return list(found.values())


def build_egg(project_dir: Path, out_dir: Path, version: str) -> Path:
    """Build the project's egg in a temporary copy of ``project_dir``."""
    settings = get_config().get("settings", "default", fallback="webcrawl.settings.base")
    with tempfile.TemporaryDirectory(prefix="webcrawl-egg-") as tmp:
        work = Path(tmp)
        for folder in ("webcrawl", *PACKAGE_DIR.values()):
            shutil.copytree(
                project_dir / folder, work / folder, ignore=shutil.ignore_patterns("__pycache__")
            )
        shutil.copy(project_dir / "scrapy.cfg", work / "scrapy.cfg")
        (work / "setup.py").write_text(
            SETUP_PY.format(
                version=version,
                packages=list(PACKAGES),
                package_dir=PACKAGE_DIR,
                package_data=PACKAGE_DATA,
                settings=settings,
            )
        )
        result = subprocess.run(
            [sys.executable, "setup.py", "bdist_egg", "-d", str(out_dir)],
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"building the egg failed:\n{result.stderr[-2000:]}")
    return next(out_dir.glob("*.egg"))


def _post(
    target: Target,
    endpoint: str,
    fields: list[tuple[str, str]],
    files: dict[str, bytes] | None = None,
) -> dict:
    if files:
        boundary = uuid.uuid4().hex
        body = b""
        for name, value in fields:
            body += (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
            ).encode()
        for name, data in files.items():
            body += (
                (
                    f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
                    f'filename="{name}.egg"\r\nContent-Type: application/octet-stream\r\n\r\n'
                ).encode()
                + data
                + b"\r\n"
            )
        body += f"--{boundary}--\r\n".encode()
        content_type = f"multipart/form-data; boundary={boundary}"
    else:
        body = urlencode(fields).encode()
        content_type = "application/x-www-form-urlencoded"
    request = urllib.request.Request(target.endpoint(endpoint), data=body, method="POST")
    request.add_header("Content-Type", content_type)
    if target.username:
        token = base64.b64encode(f"{target.username}:{target.password or ''}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.loads(response.read())
    if answer.get("status") != "ok":
        raise RuntimeError(f"{target.endpoint(endpoint)}: {answer.get('message', answer)}")
    return answer


def deploy(
    targets: list[Target],
    *,
    workers: int,
    seeds: str | None,
    settings: list[str],
    version: str | None = None,
    out=sys.stdout,
) -> list[tuple[str, str]]:
    """Upload the egg to every target and start ``workers`` jobs on each; return (url, jobid)."""
    cfg = closest_scrapy_cfg()
    if not cfg:
        raise ValueError("run webcrawl deploy from the project (no scrapy.cfg found)")
    version = version or time.strftime("%Y%m%d%H%M%S")
    jobs = []
    with tempfile.TemporaryDirectory(prefix="webcrawl-deploy-") as tmp:
        egg = build_egg(Path(cfg).parent, Path(tmp), version)
        out.write(f"built {egg.name} ({egg.stat().st_size} bytes)\n")
        for target in targets:
            _post(
                target,
                "addversion.json",
                [("project", target.project), ("version", version)],
                {"egg": egg.read_bytes()},
            )
            out.write(f"{target.name}: deployed {target.project} {version} to {target.url}\n")
        for target in targets:
            for _ in range(workers):
                fields = [("project", target.project), ("spider", "web")]
                fields += [("setting", s) for s in settings]
                if seeds and not jobs:
                    fields.append(("seeds", seeds))
                answer = _post(target, "schedule.json", fields)
                jobs.append((target.url, answer["jobid"]))
                out.write(f"{target.name}: started web job {answer['jobid']}\n")
    return jobs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("targets", nargs="*", help="[deploy:NAME] targets in scrapy.cfg (all)")
    parser.add_argument("--url", action="append", default=[], help="a scrapyd URL (repeatable)")
    parser.add_argument("--workers", type=int, default=1, help="web jobs to start per target")
    parser.add_argument("--seeds", help="seeds for the first job (URLs, comma-separated)")
    parser.add_argument("--version", help="egg version (default: a timestamp)")


def run(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise ValueError("--workers must be at least 1")
    if args.url:
        targets = [Target(f"url{i}", url) for i, url in enumerate(args.url)]
    else:
        targets = targets_from_config(args.targets)
    settings = list(args.set)
    if args.crawl:  # the jobs join this crawl: it goes to them as their setting
        named = [s.partition("=")[2] for s in settings if s.startswith("WEBCRAWL_CRAWL=")]
        if named and named[-1] != args.crawl:
            raise ValueError(
                f"--crawl {args.crawl} and -s WEBCRAWL_CRAWL={named[-1]} name "
                "different crawls: give one of them"
            )
        settings.append(f"WEBCRAWL_CRAWL={args.crawl}")
    if args.workers * len(targets) > 1 and not any(s.startswith("REDIS_URL=") for s in settings):
        print(
            "webcrawl deploy: note: several workers share a crawl only through one Redis; "
            "add -s REDIS_URL=redis://HOST:6379/0 unless they run on one machine",
            file=sys.stderr,
        )
    deploy(targets, workers=args.workers, seeds=args.seeds, settings=settings, version=args.version)
    return 0
