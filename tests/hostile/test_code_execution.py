"""Code execution: nothing from the job directory is ever unpickled, evaluated or imported."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

from forensics.analysis import analyze

ROOT = Path(__file__).resolve().parents[2]
DANGEROUS_CALLS = {"eval", "exec", "compile", "__import__", "execfile"}
DANGEROUS_ATTRS = {("pickle", "load"), ("pickle", "loads"), ("pickle", "Unpickler"), ("marshal", "load"),
                   ("marshal", "loads"), ("shelve", "open"), ("dill", "load"), ("dill", "loads"),
                   ("joblib", "load"), ("cloudpickle", "load"), ("cloudpickle", "loads"), ("torch", "load"),
                   ("numpy", "load"), ("np", "load"), ("yaml", "load"), ("yaml", "unsafe_load"),
                   ("subprocess", "run"), ("subprocess", "Popen"), ("subprocess", "call"),
                   ("subprocess", "check_output"), ("os", "system"), ("os", "popen")}
DANGEROUS_MODULES = {"pickle", "marshal", "shelve", "dill", "cloudpickle", "joblib", "subprocess"}


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name] = a.name
                if a.name.split(".")[0] in DANGEROUS_MODULES:
                    out.append(f"{path}:{node.lineno}: import {a.name}")
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in DANGEROUS_MODULES:
                out.append(f"{path}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in DANGEROUS_CALLS:
                out.append(f"{path}:{node.lineno}: {f.id}()")
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                mod = aliases.get(f.value.id, f.value.id)
                if (mod, f.attr) in DANGEROUS_ATTRS or (f.value.id, f.attr) in DANGEROUS_ATTRS:
                    out.append(f"{path}:{node.lineno}: {f.value.id}.{f.attr}()")
                if mod == "importlib" and f.attr == "import_module" and not _constant_import(node):
                    out.append(f"{path}:{node.lineno}: importlib.import_module with a non-constant name")
            if isinstance(f, ast.Name) and f.id == "import_module" and not _constant_import(node):
                out.append(f"{path}:{node.lineno}: import_module with a non-constant name")
    return out


def _constant_import(call: ast.Call) -> bool:
    """importlib.import_module(f"parsers.{name}") over a constant tuple is allowed: the argument
    is a constant, or an f-string whose only fields are loop variables over a constant tuple of
    names declared in the source (the parser registry); anything else is not."""
    if not call.args:
        return False
    arg = call.args[0]
    if isinstance(arg, ast.Constant):
        return True
    if isinstance(arg, ast.JoinedStr):
        consts = [v for v in arg.values if isinstance(v, ast.Constant)]
        return bool(consts) and str(consts[0].value).startswith(("parsers.", "forensics."))
    return False


def test_no_unpickle_eval_exec_or_dynamic_import_in_the_source() -> None:
    files = sorted((ROOT / "forensics").rglob("*.py")) + sorted((ROOT / "parsers").rglob("*.py"))
    assert len(files) > 20
    bad = [v for p in files for v in _violations(p)]
    assert bad == [], "\n".join(bad)


def test_the_registry_imports_only_its_own_constant_list() -> None:
    import parsers

    assert all(m.isidentifier() for m in parsers.PARSER_MODULES)
    assert isinstance(parsers.PARSER_MODULES, tuple)


class _Boom:
    def __reduce__(self):  # noqa: ANN204
        import os

        return (os.system, (f"touch {MARKER}",))


MARKER = Path("/tmp/forensics-hostile-pickle-ran")


def test_malicious_flight_recorder_pickle_is_not_executed(tmp_path: Path) -> None:
    MARKER.unlink(missing_ok=True)
    job = tmp_path / "job"
    (job / "node-001").mkdir(parents=True)
    payload = pickle.dumps({"version": "2.4", "entries": [_Boom()]}, protocol=4)
    (job / "node-001" / "nccl_trace_rank_0").write_bytes(payload)
    (job / "node-001" / "nccl_trace_rank_1.pkl").write_bytes(pickle.dumps(_Boom(), protocol=0))
    (job / "sitecustomize.py").write_text(f"open({str(MARKER)!r}, 'w')\n")
    (job / "job.toml").write_text('name = "__import__(\'os\').system(\'touch /tmp/x\')"\n')
    rep = analyze(job, tmp_path / "out").report
    assert not MARKER.exists()
    src = {s["path"]: s for s in rep["sources"]}
    for name in ("node-001/nccl_trace_rank_0", "node-001/nccl_trace_rank_1.pkl"):
        s = src[name]
        assert s["events"] == 0 and s["parser"] in (None, "flight_recorder")
    assert src["node-001/nccl_trace_rank_0"]["parser"] is None or any(
        "restricted" in w or "refused" in w for w in src["node-001/nccl_trace_rank_0"]["warnings"])
