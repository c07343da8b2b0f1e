"""Import blocks for generated modules, sorted as ruff's isort sorts them.

Generated code must pass ``ruff check`` with the host's first-party packages, so the
generator writes its imports already in isort's order and sections.
"""

from __future__ import annotations

from collections.abc import Sequence

Imports = tuple[str, Sequence[str]]
"""A module and the names imported from it."""


def import_sections(
    module: str,
    *,
    stdlib: Sequence[Imports] = (),
    third_party: Sequence[Imports] = (),
    first_party: Sequence[Imports] = (),
    host: Sequence[Imports] = (),
    indent: str = "",
) -> str:
    """The import sections of ``module``, blank-line separated, in isort's order.

    Host modules (``host``) in ``module``'s own package are imported relatively (the
    last section), others absolutely among the first-party imports: where the package
    lives then changes nothing but its name.
    """
    package = module.rpartition(".")[0]
    absolute = list(first_party)
    relative = []
    for dotted, names in host:
        parent, _, leaf = dotted.rpartition(".")
        if parent == package:
            relative.append((f".{leaf}", names))
        else:
            absolute.append((dotted, names))
    sections = [] if indent else ["from __future__ import annotations"]
    for section in (stdlib, third_party, absolute, relative):
        lines = [_format_import(m, n, indent=indent) for m, n in _merged(section)]
        if lines:
            sections.append("\n".join(lines))
    return "\n\n".join(sections)


def _merged(imports: Sequence[Imports]) -> list[tuple[str, list[str]]]:
    merged: dict[str, list[str]] = {}
    for module, names in imports:
        merged.setdefault(module, []).extend(names)
    return sorted(merged.items(), key=lambda item: item[0].lower())


def _name_key(name: str) -> tuple[int, str]:
    # ruff's order-by-type: CONSTANTS, then Classes, then everything else.
    if len(name) > 1 and name.isupper():
        rank = 0
    elif name[:1].isupper():
        rank = 1
    else:
        rank = 2
    return rank, name.lower()


def _format_import(
    module: str, names: Sequence[str], *, indent: str = "", width: int = 88
) -> str:
    names = sorted(dict.fromkeys(names), key=_name_key)
    line = f"{indent}from {module} import {', '.join(names)}"
    if len(line) <= width:
        return line
    body = "".join(f"{indent}    {n},\n" for n in names)
    return f"{indent}from {module} import (\n{body}{indent})"
