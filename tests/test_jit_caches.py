"""The stale-cache guard of knorm's numba kernels (knorm/_jit.py) in every folder numba caches them in."""

import re

from numba.core import config

from knorm import _jit


def test_a_user_cache_dir_is_guarded_too(tmp_path, monkeypatch):
    """Under NUMBA_CACHE_DIR numba keeps the kernels in sub-folders named after knorm's source
    folders: a cache left there by other kernel sources is deleted (before 2026-12-02 only the
    package's __pycache__ was checked, and a caller's cached code kept an edited callee's old code);
    another module's cache files there are left alone."""
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path))
    active, _ = _jit._cache_dirs()
    assert active and all(tmp_path in d.parents for d, _ in active)
    stale, foreign = [], []
    for d, stems in active:
        d.mkdir(parents=True, exist_ok=True)
        (d / _jit._STAMP).write_text("another version's kernels")
        stem = sorted(stems)[0]
        for name in (f"{stem}.f-1.py311.nbi", f"{stem}.f-1.py311.1.nbc"):
            (d / name).write_bytes(b"old machine code")
            stale.append(d / name)
        (d / "mynotebook.f-3.py311.nbi").write_bytes(b"not knorm's")
        foreign.append(d / "mynotebook.f-3.py311.nbi")
    _jit.invalidate_stale_caches()
    assert not any(f.exists() for f in stale)
    assert all(f.exists() for f in foreign)
    assert all((d / _jit._STAMP).read_text() == _jit.kernel_hash() for d, _ in active)
    # stamped with these sources: kept
    d, stems = active[0]
    kept = d / f"{sorted(stems)[0]}.f-1.py311.nbi"
    kept.write_bytes(b"current machine code")
    _jit.invalidate_stale_caches()
    assert kept.exists()


def test_only_folders_named_after_knorm_s_sources_and_unused_ones_never_made(tmp_path, monkeypatch):
    """Every folder looked at is a knorm source folder's __pycache__ or numba's sub-folder named after
    one (``<folder>_<sha1 of its path>``), never a shared one such as IPython's ``numba_cache``; those
    numba does not use now are only checked where they exist, never created."""
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "user"))
    active, others = _jit._cache_dirs()
    for d, _ in active + others:
        assert d.name == "__pycache__" or re.fullmatch(r"(body|walks)_[0-9a-f]{40}", d.name), d
    missing = [d for d, _ in others if not d.exists()]
    _jit.invalidate_stale_caches()
    assert not any(d.exists() for d in missing)
