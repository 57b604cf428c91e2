"""`dcgmi health -c -j` and `dcgmi diag -r N -j` JSON (read by `parsers.dcgm`), into the same events
as their tables: `dcgm_health` (code Warning | Failure, one per GPU and watched subsystem) and
`dcgm_diag` (code Fail | Warn, one per test result). Pass / Healthy / Skip make no event.

Shapes, from DCGM's dcgmi sources (github.com/NVIDIA/DCGM, dcgmi/Health.cpp, DcgmiOutput.cpp,
Diag.cpp, nvvs/include/NvvsJsonStrings.h; jsoncpp writes keys sorted, 3-space indent):
- health: `{"body": {"Overall Health": {"value": ...}, "GPU": {"children": {"<id>": {"value":
  <entity health>, "children": {"Errors": {"children": {"<system>": {"value": "Warning",
  "overflow": ["<message>", ...]}}}}}}}}, "header": ["Health Monitor Report"]}`; systems are
  `PCIe system`, `NVLINK system`, `PMU system`, `MCU system`, `Memory system`, `SM system`,
  `InfoROM system`, `Thermal system`, `Power system`, `Driver`, `ConnectX system`; entity groups
  other than `GPU` (NvSwitch, ConnectX) keep their id with no GPU index.
- diag: `{"DCGM GPU Diagnostic" (DCGM <= 3.x) | "DCGM Diagnostic" (4.x): {"test_categories":
  [{"category": ..., "tests": [{"name": ..., "results": [{"gpu_ids": "0" (<= 3.x) | "entity_group":
  "GPU", "entity_id": 0 (4.x), "status": "Pass|Fail|Warn|Skip", "warnings": "<text>" (2.x) |
  [{"warning"|"warnings": "<text>", "error_id": n, ...}], "info": ...}], "test_summary": {...}}]}],
  "runtime_error": "..."}}`.

The event's line is that of its `"status"` / `"value"` key; its message is what dcgmi's table
prints for the same record, from the record's own values: `PCIe system: Warning - <messages>` and
`<test>: Fail - GPU 0: <warnings>`. Positions come from a JSON decoder that records where each
object starts (the standard library's pure-Python scanner with its object hook wrapped), so the
document is capped at MAX_JSON_BYTES (real outputs are a few KiB to a few hundred KiB).
"""

from __future__ import annotations

import bisect
import json
import json.decoder
import json.scanner
import re
from typing import Any

import polars as pl

MAX_JSON_BYTES = 16 * 1024 * 1024
DIAG_ROOTS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")
HEALTH_HEADER = "Health Monitor Report"
_FAULT_HEALTH = ("Warning", "Failure")
_FAULT_DIAG = ("Fail", "Warn")


class _Obj(dict):
    """A JSON object that knows where it starts and ends in the text."""

    start: int = 0
    end: int = 0


def _decode(text: str) -> Any:
    dec = json.JSONDecoder()

    def parse_object(s_and_end: tuple[str, int], strict: bool, scan_once: Any, object_hook: Any,
                     object_pairs_hook: Any, memo: Any = None) -> tuple[_Obj, int]:
        start = s_and_end[1] - 1
        obj, end = json.decoder.JSONObject(s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo)
        o = _Obj(obj)
        o.start, o.end = start, end
        return o, end

    dec.parse_object = parse_object  # type: ignore[assignment]
    dec.scan_once = json.scanner.py_make_scanner(dec)  # the pure-Python scanner calls parse_object
    return dec.decode(text)


def kind_of(text: str) -> str | None:
    """'health' | 'diag' for a dcgmi JSON document's text (cheap: before decoding), else None."""
    head = text[:4096]
    if not head.lstrip().startswith("{"):
        return None
    if any(f'"{r}"' in head for r in DIAG_ROOTS) and '"test_categories"' in text:
        return "diag"
    if f'"{HEALTH_HEADER}"' in text and '"body"' in head:
        return "health"
    return None


class _Lines:
    def __init__(self, text: str, nos: list[int]) -> None:
        self.text = text
        self.nl = [m.start() for m in re.finditer("\n", text)]
        self.nos = nos

    def at(self, pos: int) -> int:
        return self.nos[min(bisect.bisect_left(self.nl, pos), len(self.nos) - 1)]

    def key(self, obj: _Obj, key: str) -> int:
        """The line of `"key"` inside `obj` (its first line when not found)."""
        i = self.text.find(f'"{key}"', obj.start, obj.end)
        return self.at(obj.start if i < 0 else i)


def _texts(v: Any) -> list[str]:
    """Warning / info / overflow values in any of their shapes -> list of strings."""
    if v is None:
        return []
    if isinstance(v, str):
        return [v] if v.strip() else []
    if isinstance(v, dict):
        for k in ("warning", "warnings", "message", "msg"):
            if k in v:
                return _texts(v[k])
        return []
    if isinstance(v, list):
        return [t for x in v for t in _texts(x)]
    return [str(v)]


def _gpu(res: dict) -> int | None:
    group = res.get("entity_group")
    if group is not None and group != "GPU":
        return None
    for k in ("entity_id", "gpu_ids", "gpu_id"):
        v = res.get(k)
        if isinstance(v, int):
            return v
        if isinstance(v, str) and re.fullmatch(r"\d+", v.strip()):
            return int(v)
    return None


def _health(doc: dict, at: _Lines) -> tuple[list[dict], list[str]]:
    rows: list[dict] = []
    body = doc.get("body") if isinstance(doc.get("body"), dict) else {}
    for group, gnode in body.items():
        if not isinstance(gnode, _Obj) or not isinstance(gnode.get("children"), dict):
            continue
        for eid, enode in gnode["children"].items():
            errors = ((enode.get("children") or {}).get("Errors") or {}).get("children") or {}
            for system, snode in errors.items():
                status = snode.get("value") if isinstance(snode, dict) else None
                if status not in _FAULT_HEALTH:
                    continue
                msgs = _texts(snode.get("overflow"))
                gpu = int(eid) if group == "GPU" and str(eid).isdigit() else None
                rows.append({"line_no": at.key(snode, "value"), "kind": "dcgm_health", "code": status,
                             "gpu": gpu, "severity": "error" if status == "Failure" else "warning",
                             "message": f"{system}: {status}" + (f" - {' '.join(msgs)}" if msgs else "")
                             + ("" if group == "GPU" else f" ({group} {eid})")})
    return rows, []


def _diag(doc: dict, at: _Lines) -> tuple[list[dict], list[str]]:
    rows: list[dict] = []
    warnings: list[str] = []
    root = next((doc[r] for r in DIAG_ROOTS if isinstance(doc.get(r), dict)), {})
    if root.get("runtime_error"):
        warnings.append(f"dcgmi diag did not run: {root['runtime_error']}")
    for cat in root.get("test_categories") or []:
        for test in (cat.get("tests") or []) if isinstance(cat, dict) else []:
            if not isinstance(test, dict):
                continue
            results = [r for r in (test.get("results") or []) if isinstance(r, _Obj)]
            if not results and isinstance(test.get("test_summary"), _Obj):
                results = [test["test_summary"]]
            for res in results:
                status = res.get("status")
                if status not in _FAULT_DIAG:
                    continue
                gpu = _gpu(res)
                msgs = _texts(res.get("warnings"))
                where = f" - GPU {gpu}" if gpu is not None else ""
                rows.append({"line_no": at.key(res, "status"), "kind": "dcgm_diag", "code": status, "gpu": gpu,
                             "severity": "warning" if status == "Warn" else "error",
                             "message": f"{test.get('name')}: {status}{where}"
                             + (f": {' '.join(msgs)}" if msgs else "")})
    return rows, warnings


def read(lines: pl.DataFrame, kind: str) -> tuple[pl.DataFrame, pl.Series, pl.Series, list[str]]:
    """(events, claimed, ignored, warnings) of a whole dcgmi JSON file (columns line_no, text)."""
    nos = lines["line_no"].to_list()
    text = "\n".join(lines["text"].to_list())
    none = pl.Series("line_no", [], dtype=pl.Int64)
    if len(text) > MAX_JSON_BYTES:
        return pl.DataFrame(), none, none, [f"dcgmi {kind} JSON of {len(text)} bytes not read "
                                             f"(more than {MAX_JSON_BYTES})"]
    try:
        doc = _decode(text)
    except ValueError as e:
        return pl.DataFrame(), none, none, [f"dcgmi {kind} JSON could not be read: {e}"]
    if not isinstance(doc, dict):
        return pl.DataFrame(), none, none, [f"dcgmi {kind} JSON is not an object"]
    rows, warnings = (_health if kind == "health" else _diag)(doc, _Lines(text, nos))
    schema = {"line_no": pl.Int64, "kind": pl.Utf8, "code": pl.Utf8, "gpu": pl.Int64, "severity": pl.Utf8,
              "message": pl.Utf8}
    ev = pl.DataFrame(rows, schema=schema)
    claimed = ev["line_no"].unique().sort()
    ignored = lines.filter(~pl.col("line_no").is_in(claimed.implode()))["line_no"]
    return ev, claimed, ignored, warnings
