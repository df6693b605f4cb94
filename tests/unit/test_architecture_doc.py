"""docs/architecture.md is the truth about the layout: every room it names exists, every package of the
tree is one of its rooms, and every module or folder it points to by path is there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
TOP = ("provisioner", "providers")


def rooms_in_doc() -> list[str]:
    return re.findall(r"^\| `([a-z_/]+)` \|", DOC.read_text(), flags=re.M)


def packages_in_tree() -> set[str]:
    return {f"{top}/{p.parent.name}" for top in TOP for p in (ROOT / top).glob("*/__init__.py")}


def test_every_room_the_document_names_is_a_package() -> None:
    rooms = rooms_in_doc()
    assert rooms, "the Rooms table is empty"
    assert [r for r in rooms if not (ROOT / r / "__init__.py").is_file()] == []


def test_every_package_of_the_tree_is_a_room_of_the_document() -> None:
    assert sorted(packages_in_tree() - set(rooms_in_doc())) == []


def test_every_module_the_document_points_to_exists() -> None:
    named = set(re.findall(r"`([a-z_/]+(?:\.py|/))`", DOC.read_text()))
    assert named, "the document points to no module"
    missing = [
        n
        for n in sorted(named)
        if "<" not in n
        and not any((base / n).exists() for base in (ROOT, ROOT / "provisioner", ROOT / "providers"))
    ]
    assert missing == []
