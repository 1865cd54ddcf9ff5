"""A TCP link between two real servers (on 127.0.0.1) that a test can hold up.

While held, the bytes each side sends wait in the link: a replica behind it gets
none of its master's writes and its acknowledgements reach no master, as across a
network partition.  Cut, it drops whatever it holds.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class HeldLink:
    """Forwards connections on ``port`` to ``target_port``; :meth:`hold`, :meth:`cut`."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open = threading.Event()
        self._open.set()
        self._cut = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self) -> None:
        """From now on nothing passes, either way."""
        self._open.clear()

    def cut(self) -> None:
        """Close every connection and drop what is held."""
        self._cut = True
        self._open.set()
        for s in [self._listener, *self._sockets]:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)  # (close alone leaves a blocked recv be)
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._cut:
            try:
                inside, _ = self._listener.accept()
                outside = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                return
            self._sockets += [inside, outside]
            for a, b in ((inside, outside), (outside, inside)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            self._open.wait()
            if self._cut:
                return
            try:
                sink.sendall(data)
            except OSError:
                return
