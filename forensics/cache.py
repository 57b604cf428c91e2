"""A user-level cache of data compiled from the package's own files (the validated signature
catalog, `signatures.load_catalog`): built once, then read back while those files are unchanged.

The key is a digest of the bytes the data is built from (the caller lists them: the TOML files,
the tables they name, the code that validates them), so an edited TOML, a new release or another
checkout of the project gets its own entry and never a stale one; entries of several checkouts
live side by side. The folder is `$FORENSICS_CACHE_DIR` when set (empty: no cache), else
`$XDG_CACHE_HOME/forensics`, else `~/.cache/forensics`: never a job directory (evidence) nor an
output folder. An entry is JSON (no pickle), written to a temporary name and renamed into place,
so a reader sees a whole entry or none. A cache that cannot be read or written is no error: the
data is built in memory, as without a cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

CACHE_ENV = "FORENSICS_CACHE_DIR"
FORMAT = 1  # bump when the entry layout changes


def cache_dir() -> Path | None:
    """The cache folder, or None when the cache is switched off (`FORENSICS_CACHE_DIR=`)."""
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return Path(env).expanduser() if env.strip() else None
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "forensics"


def digest(inputs: Iterable[bytes]) -> str:
    """sha256 of the inputs, each length-prefixed (so no two different lists collide by concatenation)."""
    h = hashlib.sha256(FORMAT.to_bytes(4, "little"))
    for b in inputs:
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def entry_path(name: str, key: str) -> Path | None:
    d = cache_dir()
    return None if d is None else d / f"{name}-{key[:32]}.json"


def cached_json(name: str, inputs: Iterable[bytes], build: Callable[[], Any]) -> Any:
    """`build()` (JSON-serializable data), or the entry a previous call with the same inputs wrote."""
    key = digest(inputs)
    path = entry_path(name, key)
    if path is not None:
        try:
            doc = json.loads(path.read_bytes())
            if isinstance(doc, dict) and doc.get("key") == key:
                return doc["data"]
        except (OSError, ValueError, KeyError):
            pass  # absent, unreadable or torn: rebuilt below
    data = build()
    if path is not None:
        _write(path, {"key": key, "data": data})
    return data


def _write(path: Path, doc: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")  # one writer per name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
