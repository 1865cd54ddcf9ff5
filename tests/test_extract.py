from parsel import Selector

from webcrawl.extract import title, visible_text


def test_visible_text_drops_script_style_and_markup():
    html = """<html><head><title> My
      Page </title><style>p{color:red}</style><script>var x = "hidden";</script></head>
      <body><h1>Head&amp;line</h1><p>First <b>bold</b> para.</p>
      <noscript>enable js</noscript><template><p>tpl</p></template>
      <script type="application/ld+json">{"a":1}</script><p>Second\u00a0para.</p></body></html>"""
    sel = Selector(text=html)
    assert title(sel) == "My Page"
    assert visible_text(sel) == "Head&line First bold para. Second para."


def test_fragment_without_body():
    sel = Selector(text="<div>Just <i>text</i></div><script>no</script>")
    assert visible_text(sel) == "Just text"


def test_empty_page():
    sel = Selector(text="<html></html>")
    assert title(sel) == ""
    assert visible_text(sel) == ""


def test_comments_are_dropped_but_the_text_after_them_and_after_scripts_is_kept():
    html = (
        "<body><p>a<!-- secret -->b</p><div>c<script>x()</script>d<svg><text>no</text>"
        "</svg>e<?pi stuff?>f</div></body>"
    )
    assert visible_text(Selector(text=html)) == "a b c d e f"


def test_deeply_nested_page_does_not_overflow():
    # 2000 levels: past Python's recursion limit, within what libxml2 parses
    html = "<body>" + "<div>" * 2000 + "deep" + "</div>" * 2000 + "tail</body>"
    assert visible_text(Selector(text=html)) == "deep tail"


def test_json_selector_has_no_visible_text():
    assert visible_text(Selector(text='{"a": 1}', type="json")) == ""
