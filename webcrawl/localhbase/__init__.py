"""A standalone HBase 2.6 on one machine, for trying the HBase store and for the tests.

:mod:`~webcrawl.localhbase.launcher` resolves HBase's jars from Maven Central
(``pom.xml`` here) and runs, on 127.0.0.1, the HMaster in local mode (embedded
ZooKeeper and RegionServer, data on the local filesystem) and HBase's Thrift1
gateway; :mod:`~webcrawl.localhbase.command` is ``webcrawl hbase start|stop|status``.
A tool beside the product: nothing in the crawler imports it.
"""

from webcrawl.localhbase.launcher import Gateway, LocalHBase, LocalHBaseError

__all__ = ["Gateway", "LocalHBase", "LocalHBaseError"]
