"""Packaging: install_requires is what the app imports, a deployment's pieces are
extras, every requirement is pinned in requirements.txt, the license file matches the
metadata, and type checkers find the package's py.typed marker."""

from __future__ import annotations

import ast
import configparser
import re
import sys
from importlib.metadata import packages_distributions, requires
from pathlib import Path

import sagents_django

REPO = Path(__file__).resolve().parent.parent
DEPLOYMENT_ONLY = {"daphne", "uvicorn", "whitenoise", "django-environ", "psycopg"}
PINNED_UNDER_AN_EXTRA = {"uvloop", "httptools"}
"""What ``uvicorn[standard]`` brings that requirements.txt pins too: the event loop
and HTTP parser the ASGI server's figures were measured on (bench/asgi_servers.py)."""
NOT_IN_FULL = {"otel"}
"""Extras a site adds for itself: not the hosting project's stack."""


def setup_cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg", encoding="utf-8")
    return parser


def names(block: str) -> set[str]:
    """Normalized distribution names of a requirements block."""
    found = set()
    for line in block.splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            found.add(normalized(re.split(r"[\[<>=!~; ]", line, maxsplit=1)[0]))
    return found


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def install_requires() -> set[str]:
    return names(setup_cfg()["options"]["install_requires"])


def extras() -> dict[str, set[str]]:
    return {
        extra: names(block)
        for extra, block in setup_cfg()["options.extras_require"].items()
    }


def _guarded_by_import_error(tree: ast.AST) -> set[int]:
    """ids of the import nodes inside ``try: ... except ImportError``: optional."""
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name)
            and h.type.id in ("ImportError", "ModuleNotFoundError")
            for h in node.handlers
        ):
            for stmt in node.body:
                guarded |= {id(n) for n in ast.walk(stmt)}
    return guarded


def imported_distributions(root: Path, *, optional: bool = False) -> set[str]:
    """The distributions providing the third-party modules imported under ``root``
    (``optional``: only those imported under ``except ImportError``, else the rest)."""
    modules = set()
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        guarded = _guarded_by_import_error(tree)
        for node in ast.walk(tree):
            if (id(node) in guarded) != optional:
                continue
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    third_party = modules - set(sys.stdlib_module_names) - {"sagents_django"}
    providers = packages_distributions()
    missing = sorted(m for m in third_party if m not in providers)
    assert missing == [], f"modules no installed distribution provides: {missing}"
    return {normalized(d) for m in third_party for d in providers[m]}


def test_install_requires_is_exactly_what_the_app_imports() -> None:
    always = imported_distributions(REPO / "sagents_django")
    guarded = imported_distributions(REPO / "sagents_django", optional=True)
    # Every unconditional import is required; every requirement is imported (a
    # required module may also be imported under ``except ImportError``).
    assert always <= install_requires() <= always | guarded


def test_what_the_app_imports_only_if_installed_is_in_an_extra() -> None:
    optional = imported_distributions(REPO / "sagents_django", optional=True)
    assert optional - install_requires() <= extras()["full"]


def test_deployment_pieces_are_extras_not_requirements() -> None:
    assert not DEPLOYMENT_ONLY & install_requires()
    assert extras()["full"] >= DEPLOYMENT_ONLY


def test_the_full_extra_is_every_other_extra_but_tracing() -> None:
    others = {e: n for e, n in extras().items() if e not in {"full", *NOT_IN_FULL}}
    assert set().union(*others.values()) == extras()["full"]
    assert extras()["otel"] == {"opentelemetry-api"}


def test_the_hosting_project_imports_nothing_beyond_the_full_install() -> None:
    assert (
        imported_distributions(REPO / "project")
        <= install_requires() | extras()["full"]
    )


def test_requirements_txt_pins_exactly_the_app_and_the_full_extra() -> None:
    text = (REPO / "requirements.txt").read_text(encoding="utf-8")
    pinned = [line for line in text.splitlines() if line and line[0] != "#"]
    assert all("==" in line for line in pinned)
    assert names(text) == install_requires() | extras()["full"] | PINNED_UNDER_AN_EXTRA


def test_the_extra_pins_are_what_uvicorn_standard_brings() -> None:
    standard = {
        normalized(re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0])
        for r in requires("uvicorn") or []
        if "extra == 'standard'" in r
    }
    assert "uvicorn" in extras()["full"]
    assert standard >= PINNED_UNDER_AN_EXTRA


def test_the_license_file_is_the_apache_license_the_metadata_names() -> None:
    metadata = setup_cfg()["metadata"]
    assert metadata["license"] == "Apache-2.0"
    assert metadata["license_files"].strip() == "LICENSE"
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License\n                           Version 2.0" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_package_ships_a_py_typed_marker_for_type_checkers() -> None:
    assert (Path(sagents_django.__file__).parent / "py.typed").is_file()


def test_the_py_typed_marker_is_declared_as_package_data() -> None:
    data = setup_cfg()["options.package_data"]["sagents_django"].split()
    assert "py.typed" in data
