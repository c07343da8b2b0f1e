"""A user's data from start to end: retention of idle conversations, erasure of a
user or an owner in every store, and export of a user's data as a zip.

Modules: ``owners`` (whose conversations are whose, and their removal), ``stores``
(where a conversation's data lives outside its rows: files in every backend, the
in-flight buffers and viewer entries), ``retention``, ``erasure``, ``export``,
``models`` (``DataExport``).
"""
