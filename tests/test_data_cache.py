"""What the data cache keeps (servefit/data: parsed YAML and values derived from it) reads back
equal to what a run without the cache builds."""

from __future__ import annotations

import pytest

from servefit import data
from servefit.engines import BUILTIN
from servefit.engines.options import load_table


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("SERVEFIT_NO_CACHE", raising=False)
    data.load.cache_clear()
    load_table.cache_clear()
    yield tmp_path / "servefit" / "data"
    data.load.cache_clear()
    load_table.cache_clear()


@pytest.mark.parametrize("engine", sorted(BUILTIN))
def test_an_option_table_read_back_from_the_cache_is_the_built_one(engine, cache, monkeypatch):
    built = load_table(engine)
    assert [p.name.split("-")[1] for p in cache.glob("options-*.marshal")] == [engine]
    load_table.cache_clear()
    loaded = load_table(engine)
    assert loaded is not built and loaded == built
    monkeypatch.setenv("SERVEFIT_NO_CACHE", "1")
    load_table.cache_clear()
    assert load_table(engine) == built
    assert built.options and all(type(o.flags) is tuple and type(o.choices) is tuple for o in loaded.options)


def test_a_derived_value_follows_its_inputs(cache, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("one")
    calls = []

    def build():
        calls.append(1)
        return {"text": src.read_text(), "pair": (1, 2)}

    assert data.derived("t", [src], build) == {"text": "one", "pair": (1, 2)}
    assert data.derived("t", [src], build) == {"text": "one", "pair": (1, 2)} and len(calls) == 1
    src.write_text("three")  # another size: another key
    assert data.derived("t", [src], build)["text"] == "three" and len(calls) == 2
    assert len(list(cache.glob("t-*.marshal"))) == 2


def test_the_gpu_catalog_read_back_from_the_cache_is_the_built_one(cache, monkeypatch):
    from servefit.hardware import catalog

    catalog._catalog.cache_clear()
    try:
        built = catalog._catalog()
        assert len(list(cache.glob("gpus-*.marshal"))) == 1
        catalog._catalog.cache_clear()
        loaded = catalog._catalog()
        assert loaded is not built and loaded == built
        monkeypatch.setenv("SERVEFIT_NO_CACHE", "1")
        catalog._catalog.cache_clear()
        assert catalog._catalog() == built
        assert catalog.lookup("NVIDIA-L4").key == "l4" and catalog.lookup_instance("p4d.24xlarge")[1] == 8
    finally:
        catalog._catalog.cache_clear()


def test_the_rule_brief_and_the_recognition_tables_read_back_as_built(cache):
    from servefit.rules import catalog
    from servefit.sources import detect

    for fn in (catalog.brief, detect.engine_tables):
        fn.cache_clear()
    try:
        built, tables = catalog.brief(), detect.engine_tables()
        assert len(list(cache.glob("rules-brief-*.marshal"))) == 1 and len(list(cache.glob("recognise-*.marshal"))) == 1
        for fn in (catalog.brief, detect.engine_tables):
            fn.cache_clear()
        assert catalog.brief() == built and detect.engine_tables() == tables
        assert built["VLLM017"] == ("fragmentation-headroom", "warning", {"max": 0.95})
        assert built["VLLM019"] == ("low-concurrency", "info", {"min": 2})
        assert {code: (e["name"], e["severity"]) for code, e in catalog.rules().items()} == {
            code: b[:2] for code, b in built.items()}
        assert sorted(name for name, _ in tables) == sorted(BUILTIN)
    finally:
        for fn in (catalog.brief, detect.engine_tables):
            fn.cache_clear()


def test_engines_declared_by_another_package_are_seen_through_the_cache(cache, tmp_path, monkeypatch):
    from servefit import engines

    site = tmp_path / "site"
    dist = site / "other_pkg-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(tmp_path / "first"))
    assert engines._declared_elsewhere() is False
    assert len(list(cache.glob("entry-points-*.marshal"))) == 1
    assert engines._declared_elsewhere() is False
    plugin = site / "servefit_extra-0.2.dist-info"  # installing a package changes the folder
    plugin.mkdir()
    (plugin / "entry_points.txt").write_text("[servefit.engines]\nextra = extra:ENGINE\n")
    assert engines._declared_elsewhere() is True
    first = tmp_path / "first" / "local-0.1.dist-info"  # the first sys.path entry is read each time
    first.mkdir(parents=True)
    (first / "entry_points.txt").write_text("[servefit.engines]\nlocal = local:ENGINE\n")
    import shutil

    shutil.rmtree(plugin)
    assert engines._declared_elsewhere() is True
    shutil.rmtree(first)
    assert engines._declared_elsewhere() is False


def test_an_exact_catalog_name_is_found_without_the_name_heuristics_index(cache):
    from servefit.models import catalog, catalog_entries

    fns = (catalog_entries._exact, catalog._index, catalog._recipe, catalog_entries._entry, catalog_entries._spans)
    for fn in fns:
        fn.cache_clear()
    try:
        full, spans, entry_names = catalog_entries._exact()
        assert len(list(cache.glob("catalog-names-*.marshal"))) == 1
        assert len(spans) == len(entry_names) == len(catalog_entries.entries())
        for i, e in enumerate(catalog_entries.entries()):  # every name and alias, in any case, is its entry
            assert entry_names[i] == e["name"] and catalog_entries._entry(i) == e
            assert all(full[rid.lower()] == full[e["name"].lower()] for rid in e.get("aliases") or [])
        for fn in fns:
            fn.cache_clear()
        assert catalog_entries._exact() == (full, spans, entry_names)  # read back from the cache
        spec = catalog.lookup("META-LLAMA/llama-3.1-8b-instruct")
        assert spec is not None and spec.resolved_from == "catalog" and spec.num_hidden_layers == 32
        assert catalog._index.cache_info().currsize == 0  # an exact name never reads the big index
        assert catalog.lookup("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4").resolved_from == "derivative"
        assert catalog._index.cache_info().currsize == 1
    finally:
        for fn in fns:
            fn.cache_clear()


def test_an_empty_entry_on_the_import_path_is_the_working_directory(cache, monkeypatch, tmp_path):
    """`python3 -` puts '' on sys.path: the plugin scan reads it as '.', never os.stat('')."""
    import sys

    from servefit import engines

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [sys.path[0], "", *sys.path[1:]])
    assert engines._declared_elsewhere() in (True, False)
    assert data.derived("t", [tmp_path / "gone"], lambda: [1]) == [1]  # an input gone: built, not kept
    assert not list(cache.glob("t-*"))
