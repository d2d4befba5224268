"""Skill routing: ``skill_list`` with a query puts the right skill in its top 3 for the labelled prompts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from .conftest import hub_runtime

DATA = Path(__file__).parent / "data" / "routing.json"


def write_skills(root: Path) -> dict[str, object]:
    """The labelled set's skills as SKILL.md folders under ``root``; returns the set."""
    data = json.loads(DATA.read_text())
    for skill in data["skills"]:
        folder = root / skill["name"]
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {skill['name']}\ndescription: {json.dumps(skill['description'])}\n---\n\nBody.\n"
        )
    return data


def test_the_labelled_set_is_large_enough_and_consistent() -> None:
    data = json.loads(DATA.read_text())
    names = {s["name"] for s in data["skills"]}
    assert len(names) >= 20 and len(data["prompts"]) >= 50
    assert {p["skill"] for p in data["prompts"]} <= names


def test_recall_at_3_is_at_least_95_percent(tmp_path: Path) -> None:
    data = write_skills(tmp_path / ".aleph" / "skills")
    rt = hub_runtime(tmp_path)

    async def go() -> list[bool]:
        async with rt:
            service = rt.tool_service()
            hits = []
            for item in data["prompts"]:  # type: ignore[attr-defined]
                out = (await service.execute("skill_list", {"query": item["prompt"], "limit": 3})).value
                hits.append(item["skill"] in [s["id"] for s in out["skills"]])
            return hits

    hits = asyncio.run(go())
    misses = [p["prompt"] for p, ok in zip(data["prompts"], hits, strict=True) if not ok]  # type: ignore[call-overload]
    assert sum(hits) / len(hits) >= 0.95, misses
