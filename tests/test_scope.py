import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webcrawl.urls.scope import MODES, Scope, _host_key, scope_key
from webcrawl.urls.urlkey import canonical_url


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


_URLS = [
    "http://Example.COM:80/a",
    "https://example.com:443/",
    "http://127.0.0.2:8000/x",
    "http://[::1]:8080/",
    "http://[::0:1]/",
    "https://docs.example.co.uk/x?y=1",
    "http://www.example.co.uk:8080/",
    "http://xn--bcher-kva.example/",
    "http://bücher.example/",
    "https://user:pw@example.com/",
    "http://192.168.0.1/",
    "http://a.b.c.d.example.org/",
]


@pytest.mark.parametrize("mode", MODES)
@given(seeds=st.lists(st.sampled_from(_URLS), max_size=4), url=st.sampled_from(_URLS))
def test_allows_canonical_agrees_with_allows_on_canonical_urls(
    mode: str, seeds: list[str], url: str
) -> None:
    scope = Scope(mode)
    scope.add_urls([canonical_url(s) for s in seeds])
    url = canonical_url(url)
    assert scope.allows_canonical(url) == scope.allows(url)


_HOST_CHARS = st.sampled_from("aAzZ09.-_~%!$&'()*+,;=@[]:\\ \t\x00é")
_URLS = st.builds(
    lambda scheme, host, port, rest: f"{scheme}://{host}{port}{rest}",
    st.sampled_from(["http", "https", "HTTP", "Https", "ftp", "http:", ""]),
    st.one_of(st.text(_HOST_CHARS, max_size=12), st.sampled_from(["[::1]", "u:p@h", "H.Example"])),
    st.one_of(
        st.just(""),
        st.builds(lambda digits: f":{digits}", st.text("0123456789\u0668\uff10+-", max_size=7)),
        st.sampled_from([":80", ":443", ":0080", ":00443", ":65535", ":65536", ":x"]),
    ),
    st.sampled_from(["", "/", "/a/b", "?q=1", "#f", "/p?q#f", "\\x", " ", "\t/"]),
)


@given(_URLS)
@settings(max_examples=2000, deadline=None)
def test_the_fast_host_key_is_urlsplits(url):
    """scope_key's fast path for plain http(s) URLs gives what urlsplit does, errors too."""
    try:
        expected = _host_key(url)
    except ValueError as exc:
        with pytest.raises(ValueError, match=re.escape(str(exc))):
            scope_key(url, "host")
        return
    assert scope_key(url, "host") == expected, url
