"""The layout's promise: the policies import no Scrapy and no network client."""

import subprocess
import sys


def test_policies_import_no_scrapy_and_no_network_client():
    """(The Page item, and so change detection, goes through itemadapter, which imports
    Scrapy when it is installed: that is itemadapter's doing, not a dependency of ours.)"""
    code = (
        "import sys\n"
        "import webcrawl.incremental.simhash, webcrawl.incremental.revisit_sim\n"
        "import webcrawl.failpath, webcrawl.urls.scope, webcrawl.urls.seeds\n"
        "import webcrawl.frontier.adaptive_delay, webcrawl.extract, webcrawl.links\n"
        "import webcrawl.safety.addresses, webcrawl.safety.traps, webcrawl.safety.policy\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('scrapy', 'twisted', 'redis', 'happybase'))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
