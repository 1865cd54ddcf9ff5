"""This project's settings: webcrawl's add-on, and the project's own few choices.

Every default of webcrawl's components is in :mod:`webcrawl.settings.defaults`, which
the add-on applies; set any of them here (or with ``-s NAME=VALUE``) to override it.
A deployment's profile does ``from webcrawl.settings.base import *`` (see
``settings/cluster.py``), selected with
``SCRAPY_SETTINGS_MODULE=webcrawl.settings.cluster``.
"""

BOT_NAME = "webcrawl"
SPIDER_MODULES = ["webcrawl.spiders"]
NEWSPIDER_MODULE = "webcrawl.spiders"

# The frontier, middlewares, pipelines and defaults of webcrawl (webcrawl/addon.py).
ADDONS = {"webcrawl.Addon": 0}

# Say who you are: sites block anonymous crawlers.  Put a contact URL here (the add-on
# leaves a project's own, or Scrapy's, alone).
USER_AGENT = "webcrawl/0.1 (+https://github.com/webcrawl/webcrawl)"

FEED_EXPORT_ENCODING = "utf-8"
LOG_LEVEL = "INFO"
