"""Every setting a component reads is defined, with a comment, in settings/defaults.py."""

import ast
import re
from pathlib import Path

import scrapy.settings.default_settings as scrapy_defaults

ROOT = Path(__file__).resolve().parent.parent
# every package of the repository (tests aside): a component anywhere reads settings
PACKAGES = sorted(
    p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name not in ("tests",)
)
NAME = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$")
READERS = {
    "get",
    "getbool",
    "getint",
    "getfloat",
    "getlist",
    "getdict",
    "getwithbase",
    "positive_int",
    "positive_float",
    "non_negative_int",
    "non_negative_float",
    "choice",
}


def settings_read() -> dict[str, str]:
    """NAME -> file:line of every settings read in our code."""
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name not in READERS or _environ(func):
                    continue
                for arg in node.args[:2]:
                    value = arg.value if isinstance(arg, ast.Constant) else None
                    if isinstance(value, str) and NAME.match(value):
                        found.setdefault(value, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def _environ(func: ast.expr) -> bool:
    """``os.environ.get(...)`` or a WSGI ``environ.get(...)``: an environment variable
    (JAVA_HOME, HTTP_HOST ...), not a setting."""
    owner = getattr(func, "value", None)
    if isinstance(owner, ast.Name):
        return owner.id == "environ"
    return isinstance(owner, ast.Attribute) and owner.attr == "environ"


def documented() -> dict[str, bool]:
    """NAME -> whether the assignment in settings/defaults.py has a comment above it."""
    lines = (ROOT / "settings" / "defaults.py").read_text().splitlines()
    names = {}
    for i, line in enumerate(lines):
        match = re.match(r"^([A-Z][A-Z0-9_]+) = ", line)
        if match:
            j = i - 1
            while j >= 0 and re.match(r"^[A-Z][A-Z0-9_]+ = ", lines[j]):
                j -= 1  # a group of related settings shares one comment
            names[match.group(1)] = j >= 0 and lines[j].startswith("#")
    return names


def test_the_scan_finds_what_components_read():
    read = settings_read()
    for name in (
        "WEBCRAWL_DATA_DIR",
        "FRONTIER_BATCH_SIZE",
        "WEBCRAWL_SCOPE",
        "STORE_BATCH_SIZE",
        "STATUS_HEARTBEAT_TTL",
        "REDIS_URL",
    ):
        assert name in read, name


def test_every_setting_read_is_documented():
    docs = documented()
    missing = {
        name: where
        for name, where in settings_read().items()
        if name not in docs and not hasattr(scrapy_defaults, name)
    }
    assert missing == {}, f"read but not in settings/defaults.py: {missing}"


def test_our_settings_have_comments_and_prefixes():
    prefixes = (
        "WEBCRAWL_",
        "STORE_",
        "METRICS_",
        "TRAPS_",
        "LINKS_",
        "ADDRESSES_",
        "FRONTIER_",
        "FAILPATH_",
        "ADAPTIVE_DELAY_",
        "SIMHASH_",
        "REVISIT_",
        "STATUS_",
        "REDIS_",
        "SCHEDULER_",
        "BLOOM_",
        "ROBOTSTXT_",
        "WARC_",
        "SITEMAP_",
    )
    for name, commented in documented().items():
        if hasattr(scrapy_defaults, name):
            continue  # a Scrapy setting we override
        assert name.startswith(prefixes), f"{name}: no component prefix"
        assert commented, f"{name}: no comment in settings/defaults.py"


def test_consoles_that_run_code_are_off():
    from webcrawl.settings import defaults

    assert defaults.TELNETCONSOLE_ENABLED is False
    assert defaults.REMOTE_CONTROL_ENABLED is False


def test_components_are_listed_in_priority_order():
    """Read top to bottom, the lists say the order Scrapy runs them in."""
    from webcrawl.settings import defaults

    for name in ("DOWNLOADER_MIDDLEWARES", "SPIDER_MIDDLEWARES", "ITEM_PIPELINES", "EXTENSIONS"):
        orders = [order for order in getattr(defaults, name, {}).values() if order is not None]
        assert orders == sorted(orders), name
