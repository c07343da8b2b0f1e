"""What the installed package carries besides its modules."""

from __future__ import annotations

import configparser
from pathlib import Path

import sagents_django

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_ships_a_py_typed_marker_for_type_checkers() -> None:
    assert (Path(sagents_django.__file__).parent / "py.typed").is_file()


def test_the_py_typed_marker_is_declared_as_package_data() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    data = config["options.package_data"]["sagents_django"].split()
    assert "py.typed" in data
