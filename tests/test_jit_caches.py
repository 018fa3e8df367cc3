"""The stale-cache guard of knorm's numba kernels (knorm/_jit.py) in every folder numba caches them in."""

from numba.core import config

from knorm import _jit


def test_a_user_cache_dir_is_guarded_too(tmp_path, monkeypatch):
    """Under NUMBA_CACHE_DIR numba keeps the kernels in sub-folders named after knorm's source
    folders: a cache left there by other kernel sources is deleted (before 2026-12-02 only the
    package's __pycache__ was checked, and a caller's cached code kept an edited callee's old code)."""
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path))
    active, _ = _jit._cache_dirs()
    assert active and all(tmp_path in d.parents for d in active)
    stale = []
    for d in active:
        d.mkdir(parents=True, exist_ok=True)
        (d / _jit._STAMP).write_text("another version's kernels")
        for name in ("k.f-1.py311.nbi", "k.f-1.py311.1.nbc"):
            (d / name).write_bytes(b"old machine code")
            stale.append(d / name)
    _jit.invalidate_stale_caches()
    assert not any(f.exists() for f in stale)
    assert all((d / _jit._STAMP).read_text() == _jit.kernel_hash() for d in active)
    # stamped with these sources: kept
    kept = active[0] / "k.f-1.py311.nbi"
    kept.write_bytes(b"current machine code")
    _jit.invalidate_stale_caches()
    assert kept.exists()


def test_unused_cache_folders_are_not_made(tmp_path, monkeypatch):
    """Folders numba does not use now are only checked where they exist, never created."""
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "user"))
    active, others = _jit._cache_dirs()
    missing = [d for d in others if not d.exists()]
    _jit.invalidate_stale_caches()
    assert not any(d.exists() for d in missing)
