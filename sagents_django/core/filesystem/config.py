"""FileSystemConfig: how the files under one virtual directory are stored.

A filesystem holds several configs, each owning a base directory ("/Memories",
"/shared") and one a catch-all ``default=True``; a path belongs to the config with
the longest matching base directory, else to the default, else to none (then it is
an ephemeral memory file). Writes are write-through unless ``debounce_ms`` is set:
a write reaches storage before the tool answers, so a worker that dies loses nothing.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import ConfigurationError
from .errors import InvalidPath
from .paths import is_within, normalize_path
from .persistence import SupportsPersistence

DEFAULT_KEY = "__default__"
"""The identifier of a default config without a base directory (the reference's)."""


@dataclass(kw_only=True, slots=True)
class FileSystemConfig:
    """Storage settings for the files under ``base_directory``."""

    persistence: Any
    """A backend instance (``DiskPersistence()``), a backend class (instantiated
    with no arguments) or its dotted path."""
    base_directory: str | None = None
    """The virtual directory, without slashes ("Memories", "team/shared"). Optional
    when ``default`` is true."""
    storage_opts: dict[str, Any] = field(default_factory=dict)
    """Backend options (``{"path": "/data/users/42"}`` for the disk backend)."""
    debounce_ms: int = 0
    """0 writes through; more delays edits of existing files by that much (new files
    and directories are still stored at once, as in the reference)."""
    readonly: bool = False
    """Refuse writes, edits, moves and deletes under this directory."""
    default: bool = False
    """Catch every path no other config claims."""
    max_file_size: int | None = None
    """Largest file, in bytes of UTF-8, under this directory."""
    max_total_size: int | None = None
    """Largest total, in bytes, of all files under this directory."""

    def __post_init__(self) -> None:
        self.persistence = _as_backend(self.persistence)
        if self.base_directory is not None:
            try:
                path = normalize_path(self.base_directory)
            except InvalidPath as exc:
                raise ConfigurationError(
                    f"Invalid base_directory {self.base_directory!r}: {exc}"
                ) from None
            if path == "/":
                raise ConfigurationError(
                    "base_directory '/' would own every path; use default=True"
                )
            self.base_directory = path[1:]
        elif not self.default:
            raise ConfigurationError(
                "A FileSystemConfig needs a base_directory unless default=True"
            )
        if not isinstance(self.debounce_ms, int) or self.debounce_ms < 0:
            raise ConfigurationError(
                f"debounce_ms must be a non-negative integer, not {self.debounce_ms!r}"
            )
        for name in ("max_file_size", "max_total_size"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ConfigurationError(
                    f"{name} must be a non-negative integer or None, not {value!r}"
                )

    @property
    def key(self) -> str:
        """The identifier the filesystem registers this config under."""
        return self.base_directory if self.base_directory else DEFAULT_KEY

    @property
    def mount(self) -> str:
        """The virtual directory as a path ("/Memories"), "/" for a default config."""
        return "/" + self.base_directory if self.base_directory else "/"

    def matches_path(self, path: str) -> bool:
        """Whether ``path`` lies under this config's base directory (a default
        config without one matches every path)."""
        if not self.base_directory:
            return self.default
        return is_within(path, self.mount)

    def build_storage_opts(self, scope_key: Any) -> dict[str, Any]:
        """``storage_opts`` plus ``scope_key`` and ``base_directory`` (the latter
        only for a config that has one), as every backend call receives them."""
        opts = dict(self.storage_opts)
        opts["scope_key"] = scope_key
        if self.base_directory:
            opts["base_directory"] = self.base_directory
        else:
            opts.pop("base_directory", None)
        if self.max_file_size is not None:
            opts.setdefault("max_file_size", self.max_file_size)
        return opts

    def describe(self) -> dict[str, Any]:
        """A JSON view for debug summaries (the backend by class name)."""
        return {
            "base_directory": self.base_directory,
            "default": self.default,
            "persistence": type(self.persistence).__name__,
            "readonly": self.readonly,
            "debounce_ms": self.debounce_ms,
            "max_file_size": self.max_file_size,
            "max_total_size": self.max_total_size,
        }


def _as_backend(value: Any) -> Any:
    if isinstance(value, str):
        module, _, name = value.rpartition(".")
        try:
            value = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ConfigurationError(
                f"Cannot import persistence {value!r}: {exc}"
            ) from exc
    if inspect.isclass(value):
        value = value()
    if not isinstance(value, SupportsPersistence):
        raise ConfigurationError(
            f"persistence must provide write, load, delete and "
            f"list_persisted_entries; got {value!r}"
        )
    return value
