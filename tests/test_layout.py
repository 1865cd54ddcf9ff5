"""The layout's promises: old class paths still load (with a warning); policies need no Scrapy."""

import subprocess
import sys

import pytest
from scrapy.exceptions import ScrapyDeprecationWarning
from scrapy.utils.misc import load_object

from webcrawl.frontier.dupefilter import RedisBloomDupeFilter, RedisDupeFilter
from webcrawl.frontier.queue import HostQueue
from webcrawl.frontier.scheduler import Scheduler


@pytest.mark.parametrize(
    ("old", "new"),
    [("webcrawl.scheduler.Scheduler", Scheduler), ("webcrawl.queue.HostQueue", HostQueue),
     ("webcrawl.dupefilter.RedisDupeFilter", RedisDupeFilter),
     ("webcrawl.dupefilter.RedisBloomDupeFilter", RedisBloomDupeFilter)],
)  # fmt: skip
def test_an_old_class_path_in_a_settings_file_still_loads_and_names_the_new_one(old, new):
    with pytest.warns(ScrapyDeprecationWarning, match=rf"moved to {new.__module__}\."):
        assert load_object(old) is new


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
