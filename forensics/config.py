"""The optional `job.toml` at the root of a job directory (DESIGN §3). Never required."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


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


def load_job_config(root: Path) -> JobConfig:
    cfg = JobConfig()
    path = root / "job.toml" if root.is_dir() else None
    if path is None or not path.is_file() or path.is_symlink():
        return cfg
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (tomllib.TOMLDecodeError, OSError) as exc:
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
    return cfg
