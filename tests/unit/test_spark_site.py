"""What Spark's Python processes find first (services/bolts/runtime/spark_site/sitecustomize.py)."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from services.bolts.runtime.spark_python import SITE, with_site
from services.bolts.runtime.spark_site.sitecustomize import installed_first


def install(root: Path) -> tuple[str, str, str]:
    """A site-packages with a PySpark in it and the zips pip ships inside it."""
    site = root / "site-packages"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    for z in ("pyspark.zip", "py4j-0.10.9.9-src.zip"):
        (lib / z).write_bytes(b"")
    return str(site), str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")


def test_the_installed_pysparks_zips_go_last(tmp_path: Path) -> None:
    site, zipped, py4j = install(tmp_path)
    other = str(tmp_path / "project")
    assert installed_first([zipped, py4j, other, site]) == [other, site, zipped, py4j]


def test_the_zips_of_a_spark_elsewhere_stay_first(tmp_path: Path) -> None:
    site, _, _ = install(tmp_path / "a")
    elsewhere = tmp_path / "spark" / "python" / "lib"
    elsewhere.mkdir(parents=True)
    path = [str(elsewhere / "pyspark.zip"), str(elsewhere / "py4j-0.10.9.9-src.zip"), site]
    assert installed_first(path) == path


def test_without_an_installed_pyspark_nothing_moves(tmp_path: Path) -> None:
    _, zipped, py4j = install(tmp_path)
    path = [zipped, py4j, str(tmp_path / "empty")]
    assert installed_first(path) == path


def test_the_same_directory_named_another_way_is_recognised(tmp_path: Path) -> None:
    site, zipped, py4j = install(tmp_path)
    os.symlink(Path(zipped).parent, tmp_path / "lib-link")
    linked = str(tmp_path / "lib-link" / "pyspark.zip")
    assert installed_first([linked, py4j, site]) == [site, linked, py4j]


@given(st.lists(st.sampled_from(["a", "b", "c.zip", "d"]), max_size=6))
def test_a_path_keeps_its_entries(entries: list[str]) -> None:
    assert sorted(installed_first(entries)) == sorted(entries)


@given(st.lists(st.text(alphabet="abc/", min_size=1), max_size=4))
def test_with_site_puts_the_site_first_once(entries: list[str]) -> None:
    path = with_site(os.pathsep.join([str(SITE), *entries]))
    parts = path.split(os.pathsep)
    assert parts[0] == str(SITE) and parts.count(str(SITE)) == 1
    assert parts[1:] == [e for e in entries if e != str(SITE)]
