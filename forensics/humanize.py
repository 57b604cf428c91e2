"""How the reports write numbers for people: durations rounded to what matters (`17 min 10 s`,
`2 h 03 min`, `45 s`, `0.4 s`), stamps to the second in UTC (`2026-11-02 09:10:00`; the page
says once that its times are UTC), and labels for the report's keys."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["LABELS", "duration", "label", "stamp"]


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    s = float(seconds)
    sign = "-" if s < 0 else ""
    s = abs(s)
    if s < 10:
        return f"{sign}{s:.1f} s".replace(".0 s", " s")
    n = int(round(s))
    d, rem = divmod(n, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    if d:
        return f"{sign}{d} d {h} h"
    if h:
        return f"{sign}{h} h {m:02d} min"
    if m:
        return f"{sign}{m} min {sec:02d} s" if sec else f"{sign}{m} min"
    return f"{sign}{sec} s"


def stamp(value: str | datetime | None) -> str | None:
    """An ISO-8601 time (as report.json writes it) to the second, in UTC, without the zone
    letter; None stays None, text that is not a time is returned as it is."""
    if value is None:
        return None
    if isinstance(value, datetime):
        t = value
    else:
        try:
            t = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return str(value)
    if t.tzinfo is not None:
        t = t.astimezone(UTC)
    return t.strftime("%Y-%m-%d %H:%M:%S")


LABELS = {
    "checkpoint": "Checkpoint interval",
    "collective_timeout": "Collective timeout",
    "save_cost_s": "Checkpoint save cost",
    "interruptions": "Interruptions that lost work",
    "current_interval_s": "Current checkpoint interval",
    "mtbi_s": "Mean time between interruptions",
    "optimal_interval_s": "Optimal interval (Young/Daly)",
    "gpu_hours_saved": "GPU-hours it would save",
    "note": "Note",
    "configured_timeout_s": "Watchdog timeout",
    "hangs": "Interruptions the other ranks waited through",
    "waited_s": "Time spent waiting for the watchdog",
    "shorter_timeout_s": "Shorter timeout considered",
    "waits": "Waits",
    "interruption": "Interruption",
    "kind": "Kind",
    "ranks": "Ranks that waited",
    "timeout_s": "Timeout",
}


def label(key: str) -> str:
    """The people's name of a report key (known ones from LABELS, others de-snake-cased)."""
    if key in LABELS:
        return LABELS[key]
    words = key.removesuffix("_s").replace("_", " ")
    return words[:1].upper() + words[1:]
