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
