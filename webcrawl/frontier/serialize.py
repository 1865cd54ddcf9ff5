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


def dumps(obj: Any) -> bytes:
    """Serialise a request dict (or any JSON-like value) to compact JSON bytes."""
    return json.dumps(_encode(obj, "request"), separators=(",", ":"), ensure_ascii=False).encode()


def loads(data: bytes | str) -> Any:
    """Inverse of :func:`dumps`."""
    return _decode(json.loads(data))
