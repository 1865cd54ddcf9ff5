"""JSON serialisation of Scrapy request dicts for the shared queue (no pickle).

A module with ``dumps``/``loads``, usable as scrapy-redis's
``SCHEDULER_SERIALIZER``.  JSON cannot hold bytes or non-string keys, which
request dicts have (body, headers), so they are tagged:

- ``bytes``  -> ``{"$b": "<latin-1 text>"}``
- a ``dict`` with a non-``str`` key -> ``{"$d": [[key, value], ...]}``
- a ``tuple`` -> a list

Any other type raises :class:`TypeError` naming the offending value, so a
request with unserialisable ``meta`` fails loudly where it is scheduled.
Workers of different versions read each other's requests: the format is
plain JSON.
"""

from __future__ import annotations

import json
from typing import Any

_SCALARS = (str, int, float, bool, type(None))


def _plain(obj: Any) -> Any:
    """:func:`_encode` without the path: raises ``_Unserialisable`` at a value it cannot
    hold, for :func:`_encode` to say where (most requests are fine: no path is built)."""
    if isinstance(obj, _SCALARS):
        return obj
    if isinstance(obj, bytes):
        return {"$b": obj.decode("latin-1")}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and not ({"$b", "$d"} & obj.keys()):
            return {k: _plain(v) for k, v in obj.items()}
        return {"$d": [[_plain(k), _plain(v)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    raise _Unserialisable


class _Unserialisable(Exception):
    pass


def _encode(obj: Any, path: str) -> Any:
    if isinstance(obj, _SCALARS):
        return obj
    if isinstance(obj, bytes):
        return {"$b": obj.decode("latin-1")}
    if isinstance(obj, (list, tuple)):
        return [_encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and not ({"$b", "$d"} & obj.keys()):
            return {k: _encode(v, f"{path}.{k}") for k, v in obj.items()}
        return {"$d": [[_encode(k, path), _encode(v, f"{path}.{k!r}")] for k, v in obj.items()]}
    raise TypeError(
        f"cannot serialise {type(obj).__name__} at {path} for the shared queue: "
        "request meta and cb_kwargs must hold JSON-compatible values"
    )


def _decode(obj: Any) -> Any:
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    if isinstance(obj, dict):
        if len(obj) == 1:
            if "$b" in obj:
                return obj["$b"].encode("latin-1")
            if "$d" in obj:
                return {_hashable(_decode(k)): _decode(v) for k, v in obj["$d"]}
        return {k: _decode(v) for k, v in obj.items()}
    return obj


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


# one encoder: json.dumps with options makes a new one per call
_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def dumps(obj: Any) -> bytes:
    """Serialise a request dict (or any JSON-like value) to compact JSON bytes."""
    try:
        plain = _plain(obj)
    except _Unserialisable:
        plain = _encode(obj, "request")  # raises, saying where
    return _JSON.encode(plain).encode()


def loads(data: bytes | str) -> Any:
    """Inverse of :func:`dumps`."""
    return _decode(json.loads(data))
