"""Small pure parts: page specs and artifact ids."""

from __future__ import annotations

import pytest
from aleph_media._artifacts import check_id
from aleph_media._extraction import parse_pages


def test_page_specs_keep_order_and_drop_repeats() -> None:
    spec = parse_pages("5, 1-3 ,2,9-")
    assert spec is not None
    assert spec.numbers(10, 100) == [5, 1, 2, 3, 9, 10]


def test_page_work_is_bounded_by_the_cap_not_by_the_claimed_page_count() -> None:
    spec = parse_pages(",".join(["1-"] * 256))
    assert spec is not None
    assert spec.numbers(10**12, 201) == list(range(1, 202))


def test_no_spec_means_all_pages() -> None:
    assert parse_pages(None) is None and parse_pages("  ") is None


@pytest.mark.parametrize(
    "value", ["ab" * 32, "sha256:" + "AB" * 32, "aleph-artifact://sha256/" + "ab" * 32, " " + "ab" * 32 + " "]
)
def test_artifact_ids_accept_the_digest_in_its_three_spellings(value: str) -> None:
    assert check_id(value) == "ab" * 32


@pytest.mark.parametrize("value", ["", "ab" * 31, "zz" * 32, "../" + "ab" * 32])
def test_anything_else_is_not_an_artifact_id(value: str) -> None:
    with pytest.raises(ValueError, match="not an artifact id"):
        check_id(value)
