import pytest

from webcrawl.urls.scope import Scope, scope_key


def test_host_scope_includes_port():
    scope = Scope("host")
    scope.add_urls(["http://127.0.0.2:8000/", "https://example.com/"])
    assert scope.allows("http://127.0.0.2:8000/x")
    assert not scope.allows("http://127.0.0.2:8001/x")
    assert scope.allows("https://example.com:443/")  # default port is the same host
    assert scope.allows("http://example.com/")
    assert not scope.allows("https://www.example.com/")


def test_domain_scope_uses_public_suffixes_offline():
    scope = Scope("domain")
    scope.add_urls(["https://docs.example.co.uk/"])
    assert scope.allows("http://www.example.co.uk/a")
    assert not scope.allows("http://other.co.uk/")
    assert scope_key("http://127.0.0.1:81/", "domain") == "127.0.0.1"


def test_broad_allows_everything():
    assert Scope("broad").allows("http://anything.example/")


def test_unknown_mode():
    with pytest.raises(ValueError, match="unknown scope mode 'site'"):
        Scope("site")
