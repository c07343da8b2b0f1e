"""The stdio transport: a server subprocess, one JSON-RPC message per line.

Why not the SDK's ``stdio_client``: it joins each chunk it reads to the part of the
line read so far and splits the whole again, so reading one line costs time in the
square of its length (measured here: a 5 MB result took 0.6 s, 10 MB 2.9 s, and a
50 MB one, sent as a 100 MB line, did not arrive within a minute), and nothing
bounds a line. Here a line's chunks are kept in a list and joined once, and a line
longer than ``max_bytes`` ends the connection with a message saying so, which fails
the pending calls at once (the connection opens again on the next use).

The rest is as the SDK does it: the program runs from its argument list without a
shell, in a session of its own, with the SDK's short list of inherited environment
variables plus the configured ones; on close its stdin is closed, then the whole
process group gets SIGTERM and SIGKILL, every wait bounded, even when the closing
task is cancelled.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import anyio.abc

logger = logging.getLogger(__name__)

EXIT_SECONDS = 2.0
"""How long the server gets to exit after its stdin closes (then SIGTERM, then,
after as long again, SIGKILL)."""
READ_CHUNK = 1 << 16


class MessageTooLarge(Exception):
    """The server wrote a line longer than the transport accepts."""


@asynccontextmanager
async def stdio_transport(
    command: tuple[str, ...],
    *,
    env: dict[str, str],
    cwd: str | None,
    max_bytes: int,
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's pair of streams over a subprocess running ``command``."""
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage
    from mcp.types import jsonrpc_message_adapter

    process = await anyio.open_process(
        list(command),
        env=get_default_environment() | env,
        stderr=sys.__stderr__ or sys.stderr,
        cwd=cwd,
        start_new_session=True,
    )
    read_writer, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, write_reader = anyio.create_memory_object_stream[Any](0)

    async def read_lines() -> None:
        assert process.stdout is not None
        pending: list[bytes] = []
        size = 0
        async with read_writer:
            try:
                while True:
                    chunk = await process.stdout.receive(READ_CHUNK)
                    *ends, rest = chunk.split(b"\n")
                    for end in ends:
                        line = b"".join((*pending, end)) if pending else end
                        pending, size = [], 0
                        if line.strip():
                            await read_writer.send(_parse(line))
                    if rest:
                        pending.append(rest)
                        size += len(rest)
                    if size > max_bytes:
                        await read_writer.send(
                            MessageTooLarge(
                                f"the server sent a message larger than {max_bytes} "
                                "bytes (max_message_bytes); the connection was closed"
                            )
                        )
                        return
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return
            except anyio.BrokenResourceError:
                return  # the session is gone

    def _parse(line: bytes) -> Any:
        # Bytes are parsed as they are (no decoded copy of a long line); a line
        # that fails is read again with bad UTF-8 bytes replaced, so one bad
        # byte in a result does not lose the whole message.
        try:
            return SessionMessage(jsonrpc_message_adapter.validate_json(line))
        except ValueError:  # pydantic's ValidationError is one
            pass
        try:
            text = line.decode("utf-8", errors="replace")
            return SessionMessage(jsonrpc_message_adapter.validate_json(text))
        except ValueError as exc:
            return exc

    async def write_lines() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    await process.stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the server stopped reading: say so

    async with anyio.create_task_group() as group:
        group.start_soon(read_lines)
        group.start_soon(write_lines)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await write_stream.aclose()
                await _stop(process)
                await read_stream.aclose()
            group.cancel_scope.cancel()


async def _stop(process: anyio.abc.Process) -> None:
    """Close stdin, wait for the exit, then end the process group (bounded)."""
    from mcp.os.posix.utilities import terminate_posix_process_tree

    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    if not await _exited(process, EXIT_SECONDS):
        await terminate_posix_process_tree(process, EXIT_SECONDS)
        if not await _exited(process, EXIT_SECONDS):
            logger.warning("MCP server process %d outlived SIGKILL", process.pid)
    if process.stdout is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdout.aclose()
    # asyncio keeps the subprocess transport open while a pipe end is held (a
    # server killed while writing a long line): close it, as the SDK does.
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with suppress(PermissionError):
            close()


async def _exited(process: anyio.abc.Process, timeout: float) -> bool:
    # Polling returncode: wait() also waits for the pipes to close, which a child
    # of the server that inherited them can hold open.
    with anyio.move_on_after(timeout):
        while process.returncode is None:
            await anyio.sleep(0.01)
        return True
    return False
