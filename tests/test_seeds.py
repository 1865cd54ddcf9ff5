import pytest

from webcrawl.urls.seeds import parse_seed_lines, read_seeds


def test_file_with_bad_lines(tmp_path):
    f = tmp_path / "seeds.txt"
    f.write_text(
        "# my seeds\n"
        "https://example.com/\n"
        "\n"
        "example.org\n"  # no scheme
        "ftp://files.example.com/\n"  # unsupported scheme
        "http://EXAMPLE.com:80/\n"  # duplicate of line 2 after canonicalisation? no: http vs https
        "https://example.com/#top\n"  # duplicate of line 2
        "not a url at all\n"
        "  http://example.net/a  \n"
    )
    urls, bad = read_seeds(str(f))
    assert urls == ["https://example.com/", "http://example.com/", "http://example.net/a"]
    assert [(b.line, b.text) for b in bad] == [
        (4, "example.org"),
        (5, "ftp://files.example.com/"),
        (8, "not a url at all"),
    ]
    assert "did you mean https://example.org" in bad[0].reason
    assert "unsupported scheme 'ftp'" in bad[1].reason
    assert str(bad[0]).startswith(f"{f}:4: ")


def test_comma_list():
    urls, bad = read_seeds("https://a.example/,bad,https://b.example/x")
    assert urls == ["https://a.example/", "https://b.example/x"]
    assert [(b.source, b.line) for b in bad] == [("seeds", 2)]


def test_single_url():
    assert read_seeds("https://a.example/")[0] == ["https://a.example/"]


def test_missing_file_is_an_error_not_a_bad_seed():
    with pytest.raises(FileNotFoundError, match="seed file not found"):
        read_seeds("no-such-seeds.txt")


def test_empty():
    assert parse_seed_lines(["", "  ", "# c"], "x") == ([], [])
