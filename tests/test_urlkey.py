import pytest

from webcrawl.urls.urlkey import BadURLError, canonical_url, key_to_url, site_prefix, url_to_key


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("http://www.example.com/about/", "com.example.www:http/about/"),
        ("http://gora.apache.org/", "org.apache.gora:http/"),
        ("https://example.com", "com.example:https/"),
        ("http://example.com:8080/a/b.html", "com.example:http:8080/a/b.html"),
        ("http://example.com:80/x", "com.example:http/x"),  # default port dropped
        ("https://example.com:443/x", "com.example:https/x"),
        ("https://example.com:80/x", "com.example:https:80/x"),  # not default for https
        ("http://127.0.0.1:8000/p?q=1", "1.0.0.127:http:8000/p?q=1"),
        ("http://[::1]:8080/x", "[::1]:http:8080/x"),
        ("http://[2001:db8::1]/", "[2001:db8::1]:http/"),
        ("http://EXAMPLE.com/Path", "com.example:http/Path"),  # host case folds, path does not
        ("http://example.com/b?z=2&a=1", "com.example:http/b?a=1&z=2"),  # query sorted
        ("http://example.com/a#frag", "com.example:http/a"),
        ("http://user:pw@example.com/", "com.example:http/"),
        ("http://bücher.de/straße", "de.xn--bcher-kva:http/stra%C3%9Fe"),
        ("http://例え.jp/", "jp.xn--r8jz45g:http/"),
        ("http://example.com/a b", "com.example:http/a%20b"),
    ],
)
def test_key(url, key):
    assert url_to_key(url) == key
    assert key_to_url(key) == canonical_url(url)
    assert url_to_key(key_to_url(key)) == key


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/",
        "https://a.b.c.example.co.uk:8443/x/y/?q=%20&r=",
        "http://127.0.0.2:45000/s1/sub0/a3.html",
        "http://[fe80::1]:81/?",
        "http://xn--bcher-kva.de/",
        "http://example.com/path;params?q=1",
    ],
)
def test_round_trip(url):
    canon = canonical_url(url)
    assert key_to_url(url_to_key(url)) == canon
    assert canonical_url(canon) == canon  # idempotent


def test_site_rows_sort_together():
    urls = [
        "http://www.example.com/b",
        "http://example.org/",
        "http://www.example.com/a",
        "http://docs.example.com/",
    ]
    keys = sorted(url_to_key(u) for u in urls)
    assert keys[:3] == [
        "com.example.docs:http/",
        "com.example.www:http/a",
        "com.example.www:http/b",
    ]
    assert site_prefix("http://www.example.com/a/b") == "com.example.www:http"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "example.com",
        "/relative",
        "ftp://example.com/",
        "mailto:a@b.c",
        "http://",
        "http://exa mple.com:99999/",
        "javascript:alert(1)",
    ],
)
def test_bad_urls(bad):
    with pytest.raises(BadURLError):
        canonical_url(bad)


@pytest.mark.parametrize("key", ["nocolon", "com.example:http", "[::1:http/"])
def test_bad_keys(key):
    with pytest.raises(BadURLError):
        key_to_url(key)
