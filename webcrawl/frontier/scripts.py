"""The frontier's Lua scripts (``lua/*.lua``), read once, each with its keys by name.

A script's first lines declare its keys (attributes of ShardKeys, or of CrawlKeys for
``idle``; ``hq`` and ``moved`` are the host queue and moved prefixes, ``seen`` the step's
dupefilter) and the snippets of ``lua/`` it uses::

    --! keys: ready next delay leases
    --! uses: clock tiers

Its source is ``local K = {ready = KEYS[1], next = KEYS[2], ...}``, the snippets, then
the file; :meth:`Script.keys_for` gives the KEYS in the same order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from importlib.resources import files

from webcrawl.frontier.keys import CrawlKeys, ShardKeys
from webcrawl.frontier.shards import Call, Lua, ShardRouter

# A key name is the attribute of ShardKeys (CrawlKeys for the crawl-wide scripts) of that
# name, but for these; and "seen" is the dupefilter of the step's mode (:func:`seen_key`).
_ATTRIBUTES = {"hq": "host_queue_prefix", "moved": "moved_prefix"}
_SNIPPETS = ("clock", "turn", "next_work", "tiers", "ready")
_HEADER = re.compile(r"--! (\w+):(.*)")


def seen_key(keys: ShardKeys, seen_mode: str) -> str:
    """The shard's dupefilter: its set of fingerprints, or its Bloom filter."""
    return keys.bloom if seen_mode == "bloom" else keys.seen


def now_arg(now: float | None) -> str:
    """The scripts' "now": Redis's clock, unless a test simulates time."""
    return "" if now is None else repr(float(now))


@cache
def _read(name: str) -> str:
    return (files(__package__) / "lua" / f"{name}.lua").read_text(encoding="utf-8")


def _check(name: str, text: str, keys: Sequence[str], uses: list[str], rest: dict) -> None:
    """Refuse a script whose header or body would fail only when it runs."""
    problems = []
    unknown = [
        key
        for key in keys
        if key != "seen"
        and not any(hasattr(cls, _ATTRIBUTES.get(key, key)) for cls in (ShardKeys, CrawlKeys))
    ]
    if unknown:
        problems.append(f"keys that name no key: {unknown}")
    undeclared = sorted(set(re.findall(r"\bK\.(\w+)", text)) - set(keys))
    if undeclared:
        problems.append(f"K.<name> of keys not declared: {undeclared}")
    if set(uses) - set(_SNIPPETS) or rest:
        problems.append(f"unknown snippets {sorted(set(uses) - set(_SNIPPETS))} or headers {rest}")
    if "KEYS[" in text:
        problems.append("KEYS[n]: declare the key, then name it K.<name>")
    if problems:
        raise ValueError(f"lua/{name}.lua: " + "; ".join(problems))


class Script(Lua):
    """A script of ``lua/``, its keys named in its header."""

    def __init__(self, name: str) -> None:
        text = _read(name)
        header: dict[str, list[str]] = {}
        for line in text.splitlines():
            match = _HEADER.fullmatch(line)
            if not match:
                break
            header.setdefault(match[1], []).extend(match[2].split())
        self.name = name
        self.key_names = tuple(header.pop("keys", ()))
        uses = header.pop("uses", [])
        _check(name, text, self.key_names, uses, header)
        table = ", ".join(f"{key} = KEYS[{i}]" for i, key in enumerate(self.key_names, 1))
        snippets = "".join(_read(snippet) for snippet in uses)
        super().__init__(f"local K = {{{table}}}\n{snippets}{text}")

    def keys_for(self, keys: ShardKeys | CrawlKeys, seen_mode: str = "set") -> list[str]:
        """The script's KEYS: the names of its header in ``keys`` (a shard's, or the crawl's)."""
        return [
            seen_key(keys, seen_mode)
            if name == "seen"  # type: ignore[arg-type]
            else getattr(keys, _ATTRIBUTES.get(name, name))
            for name in self.key_names
        ]

    def call(
        self,
        keys: ShardKeys,
        args: Sequence[object],
        *,
        seen_mode: str = "set",
        confirm: bool = False,
        strict: bool = False,
    ) -> Call:
        """A call of the script on the shard of ``keys``, for :meth:`ShardRouter.run`."""
        return Call(
            keys.shard, self, self.keys_for(keys, seen_mode), args, confirm=confirm, strict=strict
        )

    def run(self, router: ShardRouter, keys: ShardKeys, args: Sequence[object]) -> object:
        """Run the script on the shard of ``keys`` alone: its result (its error, raised)."""
        return self.run_confirmed(router, keys, args, confirm=False)[0]

    def run_confirmed(
        self,
        router: ShardRouter,
        keys: ShardKeys,
        args: Sequence[object],
        *,
        confirm: bool = True,
    ) -> tuple[object, bool]:
        """:meth:`run`, and whether FRONTIER_REDIS_WAIT_REPLICAS replicas have its writes
        (``confirm``: ask them, all of them, connected now or not: a call confirmed this
        way is followed by a delete of the store's copy)."""
        (call,) = router.run([self.call(keys, args, confirm=confirm, strict=confirm)])
        if call.error is not None:
            raise call.error
        return call.result, call.confirmed


STEP, PEEK, COUNT = Script("step"), Script("peek"), Script("count")
SPILLED, REFILL, REFILLED = Script("spilled"), Script("refill"), Script("refilled")
RENEW, ACQUIRE, SET_DELAY = Script("renew"), Script("acquire"), Script("set_delay")
CLAIMED, IDLE = Script("claimed"), Script("idle")  # idle: crawl-wide, through redis-py
