"""Class archives of deleted venvs are removed; the others are kept."""

from __future__ import annotations

from pathlib import Path

from services.bolts.runtime.archive import OWNER, prune_archives


def test_only_archives_whose_pyspark_is_gone_are_pruned(tmp_path: Path) -> None:
    live = tmp_path / "venv" / "pyspark" / "__init__.py"
    live.parent.mkdir(parents=True)
    live.write_text("")
    cache = tmp_path / "cache"
    cache.mkdir()

    def archive(key: str, owner: str | None) -> Path:
        jsa = cache / f"spark-driver-{key}.jsa"
        jsa.write_bytes(b"x")
        if owner is not None:
            jsa.with_suffix(OWNER).write_text(owner)
        return jsa

    mine = archive("a", str(tmp_path / "gone-too" / "__init__.py"))
    alive = archive("b", str(live))
    orphan = archive("c", str(tmp_path / "deleted-venv" / "pyspark" / "__init__.py"))
    unknown = archive("d", None)
    other = cache / "hadoop-e.jar"
    other.write_bytes(b"x")
    assert prune_archives(cache, keep=mine) == [orphan]
    assert not orphan.exists() and not orphan.with_suffix(OWNER).exists()
    assert all(p.exists() for p in (mine, alive, unknown, other))
    assert prune_archives(cache, keep=mine) == []
