"""A fault-injecting proxy in front of a real HBase Thrift1 gateway (buffered, binary).

Every call a client makes goes to the real gateway on a connection of its own, message by
message (decoded with thriftpy2 and happybase's ``Hbase.thrift``), unless a fault was
asked for that call:

- ``reset``: the client's connection is closed instead of sending the call;
- ``stall:SECONDS``: the call waits that long, then goes;
- ``lose_reply``: the call goes and the server applies it, but its reply is lost (the
  client's connection is closed instead);
- ``ioerror`` / ``internal``: the client gets an IOError reply, or a
  TApplicationException INTERNAL_ERROR, and the server never sees the call (the reply
  a region in transition or a server bug gives, which a real server cannot be made to
  give on demand).

``freeze_clock(ms)`` makes every write happen at that one millisecond (HBase's delete
markers hide puts of their own millisecond, HBASE-2256): puts and deletes go as their
``...Ts`` calls, and an increment or a check-and-put, which have none, as a read and a
put at that time (the proxy serialises them: a test's single writer).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any

import happybase  # noqa: F401  (loads Hbase.thrift as the module Hbase_thrift)
import Hbase_thrift as H
from thriftpy2.protocol.binary import TBinaryProtocol
from thriftpy2.thrift import TApplicationException, TMessageType
from thriftpy2.transport import TSocket, TTransportException
from thriftpy2.transport.buffered import TBufferedTransport  # pure Python, as the protocol

KINDS = ("reset", "stall", "lose_reply", "ioerror", "internal")
LONG = struct.Struct(">q")


@dataclass
class Fault:
    api: str
    kind: str
    remaining: int
    seconds: float = 0.0


class _Socket(TSocket):
    """A TSocket around an accepted connection."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock


class ThriftProxy:
    """``with ThriftProxy(("127.0.0.1", port)) as proxy: ... proxy.url("crawl")``."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.host, self.port = self.listener.getsockname()[:2]
        self.calls: list[str] = []  # every call's name, as clients sent them
        self._faults: list[Fault] = []
        self._frozen: int | None = None
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, daemon=True, name="thrift-proxy")
        self._thread.start()

    def __enter__(self) -> ThriftProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def url(self, table_prefix: str, **extra: object) -> str:
        query = "&".join(f"{k}={v}" for k, v in {"table_prefix": table_prefix, **extra}.items())
        return f"hbase://{self.host}:{self.port}?{query}"

    def fail(self, api: str, kind: str, count: int = 1, seconds: float = 0.0) -> None:
        """The next ``count`` calls of ``api`` meet fault ``kind`` (see the module)."""
        if kind not in KINDS:
            raise ValueError(f"unknown fault {kind!r}, not one of {KINDS}")
        with self._lock:
            self._faults.append(Fault(api, kind, count, seconds))

    def pending(self) -> int:
        with self._lock:
            return sum(f.remaining for f in self._faults)

    def freeze_clock(self, ms: int | None) -> None:
        self._frozen = ms

    def close(self) -> None:
        self.listener.close()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            _close(conn)

    # -- the connections ------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _take(self, api: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.api == api and fault.remaining > 0:
                    fault.remaining -= 1
                    if not fault.remaining:
                        self._faults.remove(fault)
                    return fault
        return None

    def _serve(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self.upstream)
        except OSError:
            _close(client)
            return
        with self._lock:
            self._conns |= {client, server}
        down = TBinaryProtocol(TBufferedTransport(_Socket(client)))
        up = TBinaryProtocol(TBufferedTransport(_Socket(server)))
        try:
            while True:
                name, _, seqid = down.read_message_begin()
                args = getattr(H.Hbase, f"{name}_args")()
                down.read_struct(args)
                down.read_message_end()
                self.calls.append(name)
                fault = self._take(name)
                kind = fault.kind if fault else ""
                if kind == "reset":
                    return
                if kind == "stall":
                    time.sleep(fault.seconds)
                if kind == "internal":
                    error = TApplicationException(
                        TApplicationException.INTERNAL_ERROR, f"Internal error processing {name}"
                    )
                    _reply(down, name, seqid, error)
                    continue
                if kind == "ioerror":
                    result = getattr(H.Hbase, f"{name}_result")()
                    result.io = H.IOError(message="java.io.IOException: injected by the proxy")
                    _reply(down, name, seqid, result)
                    continue
                reply = self._forward(up, name, args)
                if kind == "lose_reply":
                    return
                _reply(down, name, seqid, reply)
        except (TTransportException, OSError, EOFError):
            return
        finally:
            with self._lock:
                self._conns -= {client, server}
            _close(client)
            _close(server)

    # -- calls to the real gateway --------------------------------------------------

    def _forward(self, up: TBinaryProtocol, name: str, args: Any) -> Any:
        frozen = self._frozen
        if frozen is None:
            return _call(up, name, args)
        if name in ("mutateRow", "mutateRows", "deleteAll", "deleteAllRow"):
            timed = getattr(H.Hbase, f"{name}Ts_args")(timestamp=frozen, **_fields(args))
            return _call(up, f"{name}Ts", timed)
        if name == "atomicIncrement":
            old = self._read(up, args.tableName, args.row, args.column)
            new = (LONG.unpack(old)[0] if old else 0) + args.value
            self._put(up, args.tableName, args.row, (args.column, LONG.pack(new)), frozen)
            return H.Hbase.atomicIncrement_result(success=new)
        if name == "checkAndPut":
            old = self._read(up, args.tableName, args.row, args.column)
            if (old or b"") != (args.value or b""):
                return H.Hbase.checkAndPut_result(success=False)
            mutation = args.mput
            self._put(up, args.tableName, args.row, (mutation.column, mutation.value), frozen)
            return H.Hbase.checkAndPut_result(success=True)
        return _call(up, name, args)

    def _read(self, up: TBinaryProtocol, table: bytes, row: bytes, column: bytes) -> bytes | None:
        args = H.Hbase.getRowWithColumns_args(
            tableName=table, row=row, columns=[column], attributes={}
        )
        result = _call(up, "getRowWithColumns", args)
        for found in result.success or []:
            cell = (found.columns or {}).get(column)
            if cell is not None:
                return cell.value
        return None

    def _put(self, up: Any, table: bytes, row: bytes, cell: tuple[bytes, bytes], ts: int) -> None:
        column, value = cell
        mutation = H.Mutation(isDelete=False, column=column, value=value, writeToWAL=True)
        args = H.Hbase.mutateRowTs_args(
            tableName=table, row=row, mutations=[mutation], timestamp=ts, attributes={}
        )
        result = _call(up, "mutateRowTs", args)
        if result.io is not None:
            raise result.io


def _fields(args: Any) -> dict[str, Any]:
    return {name: getattr(args, name) for _, name, *_ in args.thrift_spec.values()}


def _call(up: TBinaryProtocol, name: str, args: Any) -> Any:
    """Send one call to the real gateway; its result struct (or TApplicationException)."""
    up.write_message_begin(name, TMessageType.CALL, 0)
    up.write_struct(args)
    up.write_message_end()
    up.trans.flush()
    _, mtype, _ = up.read_message_begin()
    if mtype == TMessageType.EXCEPTION:
        error = TApplicationException()
        up.read_struct(error)
        up.read_message_end()
        return error
    result = getattr(H.Hbase, f"{name}_result")()
    up.read_struct(result)
    up.read_message_end()
    return result


def _reply(down: TBinaryProtocol, name: str, seqid: int, result: Any) -> None:
    kind = (
        TMessageType.EXCEPTION if isinstance(result, TApplicationException) else TMessageType.REPLY
    )
    down.write_message_begin(name, kind, seqid)
    down.write_struct(result)
    down.write_message_end()
    down.trans.flush()


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
