"""Storage backends for the virtual filesystem: memory (a dict) and disk (a root
directory). Host code adds its own (a database) by implementing ``Persistence``."""

from __future__ import annotations

from .disk import DiskPersistence
from .memory import MemoryPersistence

__all__ = ["DiskPersistence", "MemoryPersistence"]
