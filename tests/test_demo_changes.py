"""The changing demo web: change processes, noise, ETag/Last-Modified and 304s."""

import email.utils
import json
import urllib.error
import urllib.request

import pytest

from webcrawl.demo import demo_server
from webcrawl.demo.changes import DAY, HOUR, ChangeModel


def test_change_model_versions_follow_the_processes_on_the_fast_clock():
    urls = [f"http://h/{i}" for i in range(400)]
    model = ChangeModel(urls, seed=1, speed=3600.0, start=1000.0)
    kinds = {p.kind for p in model.processes.values()}
    assert kinds == {"poisson", "periodic"}
    for url in urls[:50]:
        proc = model.processes[url]
        versions = [model.version(url, 1000.0 + t) for t in range(0, 2000, 50)]
        assert versions == sorted(versions) and versions[0] == 0  # never goes back
        v = versions[-1]
        if v:  # Last-Modified is the real time the version began, before now
            lm = model.last_modified(url, v)
            assert 1000.0 < lm <= 1000.0 + 1950
            assert model.version(url, lm + 1e-6) == v and model.version(url, lm - 1e-6) == v - 1
        if proc.kind == "periodic":
            assert proc.period in (HOUR, DAY, 7 * DAY)
    truth = model.truth(now=1000.0 + 1950)
    page = truth["pages"][urls[0]]
    assert len(page["changes"]) == page["version"]
    assert page["period"] == pytest.approx(model.processes[urls[0]].period / 3600.0)


def get(url, **headers):
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@pytest.mark.e2e
def test_server_sends_noise_version_etags_and_304s(tmp_path):
    log = tmp_path / "requests.jsonl"
    with demo_server(2, 20, log, change_speed=3.0) as info:
        url = info["seeds"][0]
        status, headers, body = get(url)
        assert status == 200 and headers["ETag"].startswith('"v')
        assert b'class="advert"' in body and b"Page generated" in body
        answers = [get(url) for _ in range(8)]  # the same version, with other noise
        same = {b for _, h, b in answers if h["ETag"] == headers["ETag"]} | {body}
        assert len(same) >= 2 or len({h["ETag"] for _, h, _ in answers}) > 1
        status, fresh, _ = get(url, **{"If-None-Match": headers["ETag"]})
        assert status == 304 or fresh["ETag"] != headers["ETag"]  # 200 only for a new version
        now = email.utils.formatdate(usegmt=True)
        assert get(url, **{"If-Modified-Since": now})[0] == 304
        old = email.utils.formatdate(0, usegmt=True)
        assert get(url, **{"If-Modified-Since": old})[0] == 200
        # If-None-Match decides when present (RFC 9110): a stale ETag gets the page even
        # when If-Modified-Since is current (versions made within one second share it)
        stale = {"If-None-Match": '"v-stale"', "If-Modified-Since": now}
        assert get(url, **stale)[0] == 200
        truth = json.loads(get(f"http://{info['hosts'][0]}/__truth__")[2])
        assert truth["speed"] == 3.0 and url in truth["pages"]
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert all("v" in e for e in entries if e["path"] == "/")
