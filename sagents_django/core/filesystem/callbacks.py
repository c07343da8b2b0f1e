"""Persistence callbacks: the file tools telling a site's own storage what they do.

Sagents' FileSystem middleware takes ``persistence:`` (a module implementing
``FilesystemCallbacks``) or inline ``on_write`` / ``on_read`` / ``on_delete`` /
``on_list`` functions, with a ``context`` map given to each call. They sit beside the
storage backends of ``FileSystemConfig`` (which keep the filesystem itself): a
callback is the site's hook into what the *agent's tools* do, with the site's own
context (a user id, a session id), for storage the filesystem does not own. Every
callback is optional:

- ``on_write(file_path, content, context)``: after a tool created a file or changed
  its content (``write_file``, ``edit_file``, ``edit_lines``, the new path of
  ``move_file``), with the full content;
- ``on_delete(file_path, context)``: after ``delete_file``, and for the old path of
  ``move_file``;
- ``on_read(file_path, context)``: the file's text, or None (or ``FileNotFound``)
  when the site has none. With ``cache_reads`` (the default) it is asked for a path
  the filesystem does not hold, and what it returned is kept by the middleware
  (one agent: with the runtime, one turn); without, it is asked first on every read, so a change made elsewhere is
  seen at once. Reads, edits and ``search_text`` go through it;
- ``on_list(context)``: paths the site holds; ``ls`` and ``search_text`` add them.

A callback may be sync or async. It fails by raising; a return value of
``on_write`` / ``on_delete`` is ignored. With ``fail_on_persistence_error`` a failure
fails the tool call and undoes its change (the model reads why); without (the
default) it is logged, the change stays, and the tool's result carries a short
warning. Writes and deletes tell the callbacks under the filesystem's lock, so the
site's storage sees one path's changes in the order the filesystem made them.

The read cache belongs to one middleware instance, never to the filesystem: agents
sharing a filesystem scope may carry different contexts (another user's id).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..exceptions import ConfigurationError
from .entries import FileEntry, byte_size
from .errors import (
    FileNotFound,
    FileSystemError,
    InvalidPath,
    PersistenceError,
    SizeLimitExceeded,
)
from .paths import normalize_file_path

logger = logging.getLogger(__name__)

HOOKS = ("on_write", "on_read", "on_delete", "on_list")
MAX_LISTED = 100_000
"""Paths taken from one ``on_list`` call; more are ignored (and logged)."""
WARNING = " (persistence warning: the site's storage did not take this change)"


class FilesystemCallbacks:
    """Base class for a ``persistence=`` object; override the hooks you need.

    A plain object with any of these methods works as well (no subclassing needed);
    a method left out is never called."""

    def on_write(self, file_path: str, content: str, context: dict[str, Any]) -> Any:
        """A tool created ``file_path`` or changed its content to ``content``."""

    def on_read(self, file_path: str, context: dict[str, Any]) -> str | None:
        """The text of ``file_path`` in the site's storage; None when it has none."""
        return None

    def on_delete(self, file_path: str, context: dict[str, Any]) -> Any:
        """A tool deleted ``file_path``."""

    def on_list(self, context: dict[str, Any]) -> Iterable[str]:
        """Every path the site's storage holds."""
        return []


class PersistenceCallbacks:
    """The callbacks one FileSystem middleware was given, with its options."""

    def __init__(
        self,
        *,
        persistence: Any = None,
        on_write: Callable[..., Any] | None = None,
        on_read: Callable[..., Any] | None = None,
        on_delete: Callable[..., Any] | None = None,
        on_list: Callable[..., Any] | None = None,
        context: Mapping[str, Any] | None = None,
        cache_reads: bool = True,
        fail_on_persistence_error: bool = False,
    ) -> None:
        given = {
            "on_write": on_write,
            "on_read": on_read,
            "on_delete": on_delete,
            "on_list": on_list,
        }
        self.hooks: dict[str, Callable[..., Any]] = {}
        if persistence is not None:
            target = _as_object(persistence)
            for name in HOOKS:
                method = getattr(target, name, None)
                if _inherited(target, name):
                    continue  # the base class's no-op: left out
                if method is not None:
                    if not callable(method):
                        raise ConfigurationError(
                            f"persistence.{name} must be callable, not {method!r}"
                        )
                    self.hooks[name] = method
            if not self.hooks:
                raise ConfigurationError(
                    f"persistence {persistence!r} has none of {', '.join(HOOKS)}"
                )
        for name, function in given.items():
            if function is None:
                continue
            if not callable(function):
                raise ConfigurationError(f"{name} must be a function, not {function!r}")
            self.hooks[name] = function  # an inline function wins over the object's
        if context is not None and not isinstance(context, Mapping):
            raise ConfigurationError(f"context must be a dict, not {context!r}")
        for name, flag in (
            ("cache_reads", cache_reads),
            ("fail_on_persistence_error", fail_on_persistence_error),
        ):
            if not isinstance(flag, bool):
                raise ConfigurationError(f"{name} must be True or False, not {flag!r}")
        self.context = dict(context or {})
        self.cache_reads = cache_reads
        self.fail = fail_on_persistence_error
        self._cache: dict[str, str] = {}

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def describe(self) -> dict[str, Any]:
        return {
            "hooks": sorted(self.hooks),
            "cache_reads": self.cache_reads,
            "fail_on_persistence_error": self.fail,
        }

    # Calling ----------------------------------------------------------------------
    def _call(self, name: str, *args: Any) -> Any:
        result = self.hooks[name](*args, dict(self.context))
        if inspect.isawaitable(result):
            # Tools run in worker threads, which have no running loop of their own.
            result = asyncio.run(_awaited(result))
        return result

    def _failed(self, name: str, path: str, exc: Exception) -> PersistenceError:
        logger.warning(
            "Persistence callback %s failed for %s", name, path, exc_info=exc
        )
        return PersistenceError(
            f"Failed to persist {path}: {name} raised {type(exc).__name__}: {exc}"
        )

    # Changes ----------------------------------------------------------------------
    def changed(
        self,
        *,
        written: Mapping[str, str] | None = None,
        deleted: Iterable[str] = (),
        undo: Callable[[], object] | None = None,
    ) -> str:
        """Tell the callbacks of a change the filesystem made; a warning for the
        tool's result ("" when all went well). In fail mode a failure runs ``undo``
        and raises ``PersistenceError``."""
        written = dict(written or {})
        deleted = list(deleted)
        for path in [*written, *deleted]:
            self._cache.pop(path, None)
        calls: list[tuple[str, str, tuple[Any, ...]]] = []
        if "on_write" in self.hooks:
            calls += [("on_write", p, (p, c)) for p, c in written.items()]
        if "on_delete" in self.hooks:
            calls += [("on_delete", p, (p,)) for p in deleted]
        for name, path, args in calls:
            try:
                self._call(name, *args)
            except Exception as exc:
                error = self._failed(name, path, exc)
                if not self.fail:
                    return WARNING
                if undo is not None:
                    try:
                        undo()
                    except Exception:
                        logger.exception("Could not undo the change to %s", path)
                raise error from exc
        return ""

    def delete_outside(self, path: str, known: bool) -> None:
        """Delete a file only the site's storage holds (``known``: a read or a
        listing showed it); ``FileNotFound`` when it does not."""
        if not known or "on_delete" not in self.hooks:
            raise FileNotFound(f"File not found: {path}")
        self._cache.pop(path, None)
        try:
            self._call("on_delete", path)
        except Exception as exc:
            raise self._failed("on_delete", path, exc) from exc

    # Reads ------------------------------------------------------------------------
    @property
    def reads(self) -> bool:
        return "on_read" in self.hooks

    @property
    def writes(self) -> bool:
        return "on_write" in self.hooks

    @property
    def lists(self) -> bool:
        return "on_list" in self.hooks

    def cached(self, path: str) -> str | None:
        return self._cache.get(path) if self.cache_reads else None

    def read(self, path: str, *, limit: int | None, keep: bool = True) -> str | None:
        """``on_read``'s text for ``path`` (kept when caching, unless not ``keep``:
        a search reads many files once), None when the site has none. Failures:
        ``PersistenceError`` in fail mode, else logged and None."""
        cached = self.cached(path)
        if cached is not None:
            return cached
        try:
            content = self._call("on_read", path)
        except FileNotFound:
            return None
        except Exception as exc:
            error = self._failed("on_read", path, exc)
            if self.fail:
                raise error from exc
            return None
        if content is None:
            return None
        if not isinstance(content, str):
            error = PersistenceError(
                f"Cannot read {path}: on_read returned {type(content).__name__}, "
                "not text"
            )
            logger.warning("%s", error)
            if self.fail:
                raise error
            return None
        if limit is not None and byte_size(content) > limit:
            raise SizeLimitExceeded(
                f"{path} is {byte_size(content)} bytes in the site's storage; the "
                f"limit per file is {limit} bytes."
            )
        if self.cache_reads and keep:
            self._cache[path] = content
        return content

    def entry(self, path: str, content: str) -> FileEntry:
        """A file read from the site's storage, as the tools handle it."""
        return FileEntry.new_memory_file(path, content)

    def listed(self) -> list[str]:
        """``on_list``'s paths, normalized, bad ones left out (and logged).
        Failures: ``PersistenceError`` in fail mode, else logged and ``[]``."""
        try:
            raw = self._call("on_list")
            if isinstance(raw, str | bytes) or not isinstance(raw, Iterable):
                raise TypeError(f"on_list returned {raw!r}, not a list of paths")
            paths: list[str] = []
            for item in raw:
                if len(paths) >= MAX_LISTED:
                    logger.warning("on_list gave more than %d paths", MAX_LISTED)
                    break
                try:
                    if not isinstance(item, str):
                        raise InvalidPath(f"{item!r} is not a path")
                    paths.append(normalize_file_path(item))
                except FileSystemError:
                    logger.warning("on_list gave a bad path %r", item)
        except Exception as exc:
            error = self._failed("on_list", "the listing", exc)
            if self.fail:
                raise error from exc
            return []
        return paths


async def _awaited(value: Any) -> Any:
    return await value


def _inherited(target: Any, name: str) -> bool:
    found = getattr(type(target), name, None)
    return found is not None and found is getattr(FilesystemCallbacks, name)


def _as_object(value: Any) -> Any:
    """A ``persistence=`` value: an object, a module, a class (instantiated with no
    arguments) or the dotted path of a module or a class."""
    if isinstance(value, str):
        value = _import(value)
    if inspect.isclass(value):
        value = value()
    return value


def _import(path: str) -> Any:
    try:
        return importlib.import_module(path)
    except ImportError:
        pass
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigurationError(f"Cannot import persistence {path!r}: {exc}") from exc
