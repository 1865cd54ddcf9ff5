"""A DNS resolver the tests control (Scrapy's ``TWISTED_DNS_RESOLVER``): names listed in
the JSON file ``$WEBCRAWL_TEST_DNS`` (``{"name": ["address", ...]}``, read at every
lookup, so a test can change what a name resolves to mid-crawl) resolve to those
addresses; other names go to the system's resolver."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from twisted.internet._resolver import GAIResolver, HostResolution
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IHostnameResolver
from zope.interface import implementer


@implementer(IHostnameResolver)
class MapResolver:
    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self.system = GAIResolver(reactor)

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> MapResolver:
        return cls(reactor)

    def install_on_reactor(self) -> None:
        self.reactor.installNameResolver(self)

    def resolveHostName(
        self,
        receiver: Any,
        hostName: str,
        portNumber: int = 0,
        addressTypes: Any = None,
        transportSemantics: str = "TCP",
    ) -> Any:
        table = json.loads(Path(os.environ["WEBCRAWL_TEST_DNS"]).read_text())
        if hostName not in table:
            return self.system.resolveHostName(
                receiver, hostName, portNumber, addressTypes, transportSemantics
            )
        resolution = HostResolution(hostName)
        receiver.resolutionBegan(resolution)
        for address in table[hostName]:
            kind = IPv6Address if ":" in address else IPv4Address
            receiver.addressResolved(kind("TCP", address, portNumber))
        receiver.resolutionComplete()
        return resolution
