"""document_extract on documents the tests generate: every format, page ranges, limits, OCR."""

from __future__ import annotations

from pathlib import Path

import pytest

import aleph
from aleph import ValidationFailed

from .conftest import Call, caller, make_runtime
from .makers import make_docx, make_epub, make_pdf, make_pptx, make_scanned_pdf, make_xlsx, need, text_image

pytestmark = pytest.mark.anyio


async def test_pdf_gives_pages_outline_headings_and_metadata(workspace: Path, call: Call) -> None:
    make_pdf(workspace / "a.pdf", ["Alpha page", "Beta page", "Gamma page"], title="Report", outline=True)
    out = await call("document_extract", path="a.pdf")
    assert out["format"] == "pdf" and out["media_type"] == "application/pdf"
    assert out["page_count"] == 3
    assert [(p["number"], p["text"]) for p in out["pages"]] == [(1, "Alpha page"), (2, "Beta page"), (3, "Gamma page")]
    assert out["headings"] == [{"level": 1, "text": f"Chapter {i}", "page": i} for i in (1, 2, 3)]
    assert out["metadata"]["title"] == "Report" and out["metadata"]["author"] == "Aleph Tests"
    assert out["truncated"] is False and "notes" not in out


async def test_page_ranges_read_only_the_pages_asked_for(workspace: Path, call: Call) -> None:
    make_pdf(workspace / "a.pdf", [f"text of page {i}" for i in range(1, 8)], outline=True)
    out = await call("document_extract", path="a.pdf", pages="2-3,6-")
    assert [p["number"] for p in out["pages"]] == [2, 3, 6, 7]
    assert [h["page"] for h in out["headings"]] == [2, 3, 6, 7]
    assert out["pages"][0]["text"] == "text of page 2"


async def test_a_range_past_the_end_names_the_page_count(workspace: Path, call: Call) -> None:
    make_pdf(workspace / "a.pdf", ["one", "two"])
    with pytest.raises(aleph.ExecutionFailed, match=r"has 2 pages; none of pages='5-9'"):
        await call("document_extract", path="a.pdf", pages="5-9")


@pytest.mark.parametrize("spec", ["abc", "3-1", "0", "1-2-3", ",".join(["1"] * 300)])
async def test_a_malformed_page_spec_is_refused_naming_pages(workspace: Path, call: Call, spec: str) -> None:
    make_pdf(workspace / "a.pdf", ["one"])
    with pytest.raises(ValidationFailed, match=r"pages"):
        await call("document_extract", path="a.pdf", pages=spec)


async def test_page_limit_cuts_the_read_and_names_where_to_continue(workspace: Path) -> None:
    make_pdf(workspace / "a.pdf", [f"page {i}" for i in range(1, 6)])
    async with make_runtime(workspace, "[media]\nmax_pages = 2\n") as rt:
        out = await caller(rt)("document_extract", path="a.pdf", pages="2-")
    assert [p["number"] for p in out["pages"]] == [2, 3]
    assert out["truncated"] is True
    assert any("continue with pages='4-'" in n for n in out["notes"])


async def test_a_ten_thousand_page_pdf_is_read_up_to_the_page_limit(workspace: Path, call: Call) -> None:
    import pypdfium2

    doc = pypdfium2.PdfDocument.new()
    for _ in range(10_000):
        doc.new_page(200, 200)
    doc.save(str(workspace / "huge.pdf"))
    doc.close()
    out = await call("document_extract", path="huge.pdf")
    assert out["page_count"] == 10_000
    assert len(out["pages"]) == 200 and out["pages"][-1]["number"] == 200
    assert any("pages='201-'" in n for n in out["notes"])
    tail = await call("document_extract", path="huge.pdf", pages="9999-")
    assert [p["number"] for p in tail["pages"]] == [9999, 10000]


async def test_the_text_budget_cuts_a_page_and_says_so(workspace: Path) -> None:
    make_pdf(workspace / "a.pdf", ["\n".join(["word " * 15] * 40)] * 3)
    async with make_runtime(workspace, "[media]\nmax_output_chars = 1000\n") as rt:
        out = await caller(rt)("document_extract", path="a.pdf")
    assert out["chars"] == 1000 == sum(len(p["text"]) for p in out["pages"])
    assert out["truncated"] is True and any("text budget of 1000" in n for n in out["notes"])


async def test_a_scanned_pdf_is_read_with_ocr_unless_told_not_to(workspace: Path, call: Call) -> None:
    need("tesseract", "tesseract-ocr")
    make_scanned_pdf(workspace / "scan.pdf", "INVOICE 4711")
    out = await call("document_extract", path="scan.pdf")
    assert out["ocr_pages"] == [1]
    assert "INVOICE 4711" in out["pages"][0]["text"]
    plain = await call("document_extract", path="scan.pdf", ocr="never")
    assert plain["pages"][0]["text"] == "" and "ocr_pages" not in plain


async def test_a_text_pdf_is_not_sent_through_ocr_in_auto_mode(workspace: Path, call: Call) -> None:
    make_pdf(workspace / "a.pdf", ["This page has a real text layer"])
    out = await call("document_extract", path="a.pdf")
    assert "ocr_pages" not in out


async def test_docx_keeps_document_order_headings_tables_and_properties(workspace: Path, call: Call) -> None:
    make_docx(workspace / "r.docx")
    out = await call("document_extract", path="r.docx")
    assert out["format"] == "docx"
    assert out["headings"] == [
        {"level": 1, "text": "Quarterly report", "page": 1},
        {"level": 2, "text": "Regions", "page": 1},
    ]
    assert out["tables"] == [{"page": 1, "rows": [["region", "growth"], ["north", "12%"], ["south", "7%"]]}]
    text = out["pages"][0]["text"]
    assert text.index("Revenue grew") < text.index("north\t12%") < text.index("End of report.")
    assert out["metadata"]["title"] == "Quarterly report" and out["metadata"]["author"] == "Ada"


async def test_xlsx_sheets_are_pages_with_tables(workspace: Path, call: Call) -> None:
    make_xlsx(workspace / "s.xlsx")
    out = await call("document_extract", path="s.xlsx")
    assert out["metadata"]["sheets"] == ["Sales", "Notes"]
    assert out["tables"][0] == {"name": "Sales", "page": 1, "rows": [["item", "qty"], ["apples", "3"], ["pears", "5"]]}
    only = await call("document_extract", path="s.xlsx", pages="2")
    assert [(p["number"], p["label"], p["text"]) for p in only["pages"]] == [(2, "Notes", "checked by\tBob")]


async def test_pptx_slides_give_titles_text_tables_and_notes(workspace: Path, call: Call) -> None:
    make_pptx(workspace / "d.pptx")
    out = await call("document_extract", path="d.pptx")
    assert out["page_count"] == 3
    assert [h["text"] for h in out["headings"]] == ["Welcome", "Plan", "Numbers"]
    assert "First slide body" in out["pages"][0]["text"]
    assert out["tables"] == [{"page": 3, "rows": [["a", "b"], ["1", "2"]]}]
    assert out["pages"][2]["notes"] == "Speaker notes here"


async def test_epub_chapters_are_pages_with_dublin_core_metadata(workspace: Path, call: Call) -> None:
    make_epub(workspace / "b.epub")
    out = await call("document_extract", path="b.epub")
    assert out["format"] == "epub"
    assert out["metadata"]["title"] == "A Small Book" and out["metadata"]["creator"] == "Grace"
    assert [p["label"] for p in out["pages"]] == ["Chapter 1", "Chapter 2"]
    assert "It was a dark night." in out["pages"][0]["text"]


async def test_html_drops_scripts_and_keeps_headings_tables_and_title(workspace: Path, call: Call) -> None:
    (workspace / "p.html").write_text(
        "<html><head><title>Page</title><meta name='author' content='Lin'><style>p{}</style></head><body>"
        "<h1>Top</h1><p>Visible words</p><h3>Deep</h3><table><tr><th>k</th><th>v</th></tr><tr><td>x</td><td>1</td>"
        "</tr></table><script>var secret = 1;</script></body></html>"
    )
    out = await call("document_extract", path="p.html")
    assert out["metadata"] == {"title": "Page", "author": "Lin"}
    assert out["headings"] == [{"level": 1, "text": "Top", "page": 1}, {"level": 3, "text": "Deep", "page": 1}]
    assert out["tables"] == [{"page": 1, "rows": [["k", "v"], ["x", "1"]]}]
    assert "Visible words" in out["pages"][0]["text"] and "secret" not in out["pages"][0]["text"]


async def test_markdown_headings_ignore_code_blocks(workspace: Path, call: Call) -> None:
    (workspace / "n.md").write_text(
        "# Title\n\n```\n# not a heading\n```\n\nSub\n---\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    )
    out = await call("document_extract", path="n.md")
    assert out["headings"] == [{"level": 1, "text": "Title", "page": 1}, {"level": 2, "text": "Sub", "page": 1}]
    assert out["tables"] == [{"page": 1, "rows": [["a", "b"], ["1", "2"]]}]
    assert out["pages"][0]["text"].startswith("# Title")


async def test_an_image_is_read_with_ocr(workspace: Path, call: Call) -> None:
    need("tesseract", "tesseract-ocr")
    text_image("HELLO WORLD 42").save(workspace / "shot.png")
    out = await call("document_extract", path="shot.png")
    assert out["format"] == "image" and out["media_type"] == "image/png"
    assert out["metadata"]["width"] == 900
    assert out["pages"][0]["text"] == "HELLO WORLD 42"


async def test_the_format_comes_from_the_bytes_not_the_name(workspace: Path, call: Call) -> None:
    make_pdf(workspace / "notes.txt", ["really a pdf"])
    out = await call("document_extract", path="notes.txt")
    assert out["format"] == "pdf" and out["pages"][0]["text"] == "really a pdf"
