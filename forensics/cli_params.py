"""The CLI's parameters read without pydantic.

typer 0.2x coerces every parameter of the command it runs (the `--help` flag and the unset
options included) through a pydantic `TypeAdapter` built on first use: importing pydantic and
building eight adapters cost about 0.2 s of CPU per `forensics analyze`, more than the analysis of
a small bundle. This CLI's options are plain `str`, `Path` and `bool` values (and their `None`
defaults), which click has already read as strings and booleans; for those, `install()` makes typer
use a coercion that does what typer's own adapters do for them: a `str` is kept, a `Path` is made
from the string and then checked by typer's own `coerce_cli_path` (exists / file_okay / dir_okay /
readable / writable / resolve_path, as declared), a `bool` is kept, `None` stays `None`. Every other
annotation (enums, numbers, lists, files, custom parsers), and any value of another type (e.g. a
string from an environment variable for a bool), goes through typer's adapter as before.

`install()` feature-detects the typer internals it relies on and changes nothing (returns False)
when they are not there (older or newer typer), so the CLI then works exactly as typer makes it.
`tests/test_cli_params.py` checks the values are the same with and without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

_installed = False


def install() -> bool:
    """Route typer's plain parameters around pydantic; True when it is (or already was) in place."""
    global _installed
    if _installed:
        return True
    try:
        from typer import _coercion, _param_types, core
        runtime_param = _coercion.RuntimeParam
        original = core.build_runtime_param
        coerce_cli_path = _param_types.coerce_cli_path
    except (ImportError, AttributeError):
        return False

    @dataclass(frozen=True)
    class PlainRuntimeParam(runtime_param):  # type: ignore[misc, valid-type]
        descriptor: Any = None

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            ann = self.annotation
            if ann is bool and isinstance(value, bool):
                return value
            if ann is str and isinstance(value, str):
                return value
            if ann is Path and isinstance(value, str | Path):
                return coerce_cli_path(Path(value), self.parameter_info, path_type=Path, param=param, ctx=ctx)
            return original(self.descriptor)._coerce_value(value, param=param, ctx=ctx)

    def build(descriptor: Any) -> Any:
        info = descriptor.parameter_info
        plain = (descriptor.annotation in (str, bool, Path) and descriptor.file_annotation is None
                 and getattr(info, "parser", None) is None and getattr(info, "path_type", None) is None)
        if not plain:
            return original(descriptor)
        return PlainRuntimeParam(parameter_info=info, annotation=descriptor.annotation, descriptor=descriptor)

    core.build_runtime_param = build
    _installed = True
    return True


def installed() -> bool:
    return _installed
