"""The optional `job.toml` at the root of a job directory (DESIGN §3). Never required.

In a .tar/.tar.gz job the same file is read at the archive's root (`job.toml` or `./job.toml`) or,
when every member lies under one top folder, at `<top>/job.toml`: the layouts `tar czf job.tgz -C
job .` and `tar czf job.tgz job/` give the same configuration as the directory."""

from __future__ import annotations

import tarfile
import tomllib
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from forensics.discovery import STREAM_ERRORS, Discovery, is_archive, safe_open

MAX_JOB_TOML_BYTES = 1 << 20  # a configuration file, not a log: larger is not read


@dataclass
class JobConfig:
    name: str | None = None
    timezone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    timezone_set: bool = False
    year: int | None = None
    boot_times: dict[str, datetime] = field(default_factory=dict)
    gpus_per_node: int | None = None
    host_aliases: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _parse_time(value: object, tz: ZoneInfo) -> datetime | None:
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=tz)
    return dt.astimezone(UTC)


def pick_job_toml(names: Iterable[str]) -> str | None:
    """Of an archive's member names (regular files), the one that is the job's `job.toml`: at the
    root, or under the single top folder that holds every member; None when there is none."""
    names = list(names)
    clean = {PurePosixPath(n).as_posix(): n for n in names}  # './job.toml' -> 'job.toml'
    if "job.toml" in clean:
        return clean["job.toml"]
    tops = {PurePosixPath(n).parts[0] for n in clean if PurePosixPath(n).parts}
    if len(tops) == 1 and all(len(PurePosixPath(n).parts) > 1 for n in clean):
        return clean.get(f"{tops.pop()}/job.toml")
    return None


def _archive_text(root: Path, disc: Discovery | None) -> str | None:
    """The text of the job.toml inside the archive `root`, or None. With `disc` (the archive's
    discovery, already unpacked) the unpacked member is read; without, the archive is streamed."""
    if disc is not None:
        prefix = f"{root.name}!"
        members = {f.rel_path[len(prefix):]: f for f in disc.files if f.rel_path.startswith(prefix)}
        name = pick_job_toml(members)
        if name is None or members[name].size > MAX_JOB_TOML_BYTES:
            return None
        return members[name].real_path.read_bytes().decode("utf-8", errors="replace")
    found: dict[str, bytes] = {}
    names: list[str] = []
    if root.name.lower().endswith(".zip"):
        return _zip_text(root)
    try:
        with safe_open(root) as raw, tarfile.open(fileobj=raw, mode="r|*") as tf:
            for m in tf:
                if not m.isfile() or ".." in PurePosixPath(m.name).parts or m.name.startswith("/"):
                    continue
                names.append(m.name)
                if PurePosixPath(m.name).name == "job.toml" and len(PurePosixPath(m.name).parts) <= 3 \
                        and m.size <= MAX_JOB_TOML_BYTES and (src := tf.extractfile(m)) is not None:
                    found[m.name] = src.read()
    except (tarfile.TarError, *STREAM_ERRORS):
        pass  # a corrupt bundle: discovery reports it; the members seen so far decide
    name = pick_job_toml(names)
    return found[name].decode("utf-8", errors="replace") if name in found else None


def _zip_text(root: Path) -> str | None:
    """`_archive_text` for a zip bundle (its central directory lists the names)."""
    try:
        with safe_open(root) as raw, zipfile.ZipFile(raw) as zf:
            infos = {i.filename.replace("\\", "/"): i for i in zf.infolist() if not i.is_dir()}
            names = [n for n in infos if ".." not in PurePosixPath(n).parts and not n.startswith("/")]
            name = pick_job_toml(names)
            if name is None or infos[name].file_size > MAX_JOB_TOML_BYTES:
                return None
            return zf.read(infos[name]).decode("utf-8", errors="replace")
    except (zipfile.BadZipFile, NotImplementedError, RuntimeError, *STREAM_ERRORS):
        return None  # a corrupt bundle or an encrypted job.toml: discovery reports it


def load_job_config(root: Path, disc: Discovery | None = None) -> JobConfig:
    """The job.toml of the job directory (or .tar/.tar.gz bundle) `root`; defaults without one.
    `disc`, the discovery of an archive, saves streaming it a second time."""
    cfg = JobConfig()
    text: str | None = None
    if root.is_dir():
        path = root / "job.toml"
        if not path.is_file() or path.is_symlink():
            return cfg
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            cfg.warnings.append(f"job.toml: unreadable ({exc.strerror or exc}); ignored")
            return cfg
    elif root.is_file() and is_archive(root):
        text = _archive_text(root, disc)
    if text is None:
        return cfg
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        cfg.warnings.append(f"job.toml: not valid TOML ({exc}); ignored")
        return cfg
    if isinstance(data.get("name"), str):
        cfg.name = data["name"]
    tzname = data.get("timezone")
    if isinstance(tzname, str):
        try:
            cfg.timezone = ZoneInfo(tzname)
            cfg.timezone_set = True
        except (ZoneInfoNotFoundError, ValueError):
            cfg.warnings.append(f"job.toml: unknown timezone {tzname!r}; naive times read as UTC")
    if isinstance(data.get("year"), int):
        cfg.year = data["year"]
    if isinstance(data.get("gpus_per_node"), int):
        cfg.gpus_per_node = data["gpus_per_node"]
    boots = data.get("boot_times", {})
    if isinstance(boots, dict):
        for host, value in boots.items():
            t = _parse_time(value, cfg.timezone)
            if t is None:
                cfg.warnings.append(f"job.toml: boot time for {host!r} is not a date-time; ignored")
            else:
                cfg.boot_times[str(host)] = t
    aliases = data.get("host_aliases", {})
    if isinstance(aliases, dict):
        cfg.host_aliases = {str(k): str(v) for k, v in aliases.items()}
    for host, t in list(cfg.boot_times.items()):  # a boot time given under a host's raw name also
        if host in cfg.host_aliases:                # holds for its alias (what the logs are keyed by)
            cfg.boot_times.setdefault(cfg.host_aliases[host], t)
    return cfg
