import pytest
from scrapy import Request, Spider
from scrapy.utils.request import request_from_dict

from webcrawl.frontier import serialize


class S(Spider):
    name = "s"

    def parse(self, response):
        pass

    def other(self, response):
        pass


def round_trip(request, spider):
    data = serialize.dumps(request.to_dict(spider=spider))
    assert isinstance(data, bytes)
    assert b"pickle" not in data
    return request_from_dict(serialize.loads(data), spider=spider)


def test_request_round_trip():
    spider = S()
    request = Request(
        "http://example.com/ü?a=1",
        callback=spider.other,
        method="POST",
        body=b"\x00\xffbinary",
        headers={"X-A": ["1", "2"], b"X-B": b"\xe9"},
        cookies={"c": "v"},
        meta={"depth": 2, "redirect_urls": ["http://a/"], "nested": {"t": (1, 2)}, "f": 0.5},
        priority=-3,
        dont_filter=True,
        cb_kwargs={"k": [1, None, True]},
        flags=["x"],
    )
    back = round_trip(request, spider)
    for attr in (
        "url",
        "method",
        "body",
        "cookies",
        "priority",
        "dont_filter",
        "flags",
        "cb_kwargs",
    ):
        assert getattr(back, attr) == getattr(request, attr), attr
    assert back.callback == spider.other
    assert back.headers.getlist("X-A") == [b"1", b"2"]
    assert back.headers["X-B"] == b"\xe9"
    assert back.meta["nested"] == {"t": [1, 2]}  # tuples come back as lists
    assert back.meta["depth"] == 2


def test_tagged_looking_user_dicts_survive():
    value = {"$b": "not bytes", "x": 1}
    assert serialize.loads(serialize.dumps(value)) == value
    assert serialize.loads(serialize.dumps({1: "int key"})) == {1: "int key"}


def test_unserialisable_meta_fails_loudly():
    with pytest.raises(TypeError, match=r"object at request\.meta\.obj"):
        serialize.dumps(Request("http://a/", meta={"obj": object()}).to_dict())
