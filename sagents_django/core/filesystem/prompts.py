"""What the model reads about the filesystem: the system prompt, tool descriptions
and the tools' JSON schemas (argument names as in the reference).

Kept apart from the middleware's code so the wording can be reviewed (and overridden
with ``custom_tool_descriptions``) without reading Python. The wording follows the
reference; where this port differs (``write_file`` overwrites, ``move_file`` exists,
paths are rooted at ``/``), the text says what the tools really do.
"""

from __future__ import annotations

from typing import Any

from ..limits import MAX_PATTERN_CHARS
from .text import DEFAULT_READ_LIMIT

SYSTEM_PROMPT = """\
## Filesystem Tools

You have access to a virtual filesystem with these tools:
- `ls`: List files (optionally filter with patterns)
- `read_file`: Read file contents with line numbers and pagination
- `write_file`: Create a file, or overwrite an existing one
- `edit_file`: Modify existing files with string replacement
- `search_text`: Search for text patterns in specific files or across all files
- `edit_lines`: Replace a block of lines by line number range
- `delete_file`: Delete files from the filesystem
- `move_file`: Move or rename a file or directory

## File Organization

Use hierarchical paths to organize files logically:
- All paths start with a forward slash "/"
- Examples: "/notes.txt", "/Chapter1/summary.md", "/data/results.csv"
- No path traversal ("..") or home directory ("~") allowed

## Pattern Filtering

The `ls` tool supports wildcard patterns:
- `*` matches any characters
- Examples: `*summary*`, `*.md`, `/Chapter1/*`

## Best Practices

- Always use `ls` first to see available files
- Read files before editing to understand content
- Use `edit_file` for small, targeted edits with string replacement
- Use `edit_lines` for large block replacements (more efficient with tokens)
- Use `write_file` for new files or to replace a whole file
- Provide sufficient context in `old_string` to ensure unique matches
- Group related files in the same directory
- Use `move_file` to rename files or move them to a different directory
- Never `delete_file` without first using `ls` to locate it

## Persistence Behavior

- Different directories may have different persistence settings
- Some directories may be read-only (you can read but not write)
- Large or archived files may load slowly on first access"""

LONG_TERM_MEMORY_PROMPT = """\
## Long-term Memory

Files under `/{prefix}/` are kept across conversations: save there what you should \
remember later (preferences, facts, decisions), and look there first when earlier \
context may help. Other files belong to this conversation's work."""

DESCRIPTIONS: dict[str, str] = {
    "ls": """\
Lists files in the filesystem, optionally filtering by pattern or directory.

Usage:
- Returns a JSON array of entries (path, title, entry_type, file_type, persistence, size).
- You can optionally provide a pattern parameter to filter the files by pattern.
- A pattern naming a directory (e.g. '/Chapter 1') lists what is inside it.
- This is very useful for exploring the file system and finding the right file to read or edit.
- You should almost ALWAYS use this tool before using the read or edit tools.

Optionally filter by pattern using wildcards:
- Use '*' to match any characters
- Examples: '*summary*', '*.md', '/Chapter 1/*'

Without a pattern, lists all files.""",
    "read_file": """\
Read a file's contents with line numbers.

Supports pagination with offset and limit parameters.
Returns the file content with line numbers for easy reference.""",
    "write_file": """\
Write content to a file, creating it (and its directories) or replacing it.

Use edit_file or edit_lines to change part of an existing file.""",
    "edit_file": """\
Edit a file by replacing old_string with new_string.

Performs string replacement within the file. By default, requires
old_string to appear exactly once (for safety). Use replace_all: true
to replace multiple occurrences.""",
    "search_text": """\
Search for text patterns within files.

Can search within a specific file or across all files.
Returns matches with line numbers and optional context lines.

Usage:
- Provide pattern (required) - text or regex to search for (RE2 syntax: no
  look-around or back-references; a match stays within one line, and ^ and $
  match at line starts and ends)
- Provide file_path (optional) - if omitted, searches all files
- Set case_sensitive (optional, default: true)
- Set context_lines (optional, default: 0) - lines before/after to show
- Set max_results (optional, default: 50) - limit number of results

Examples (call with a JSON object matching the schema):
- Search a single file: {"pattern": "TODO", "file_path": "/notes.txt"}
- Search all files: {"pattern": "important", "case_sensitive": false}
- With surrounding context: {"pattern": "error", "context_lines": 2}""",
    "edit_lines": """\
Edit a file by replacing a range of lines with new content.

This tool is more efficient than edit_file for replacing large blocks of text,
such as rewriting multiple paragraphs or sections. It uses line numbers instead
of string matching, making it more reliable for large edits.

Line numbers are 1-based (matching read_file output) and the range is inclusive
(both start_line and end_line are replaced).

Usage:
- First use read_file to see the file with line numbers
- Identify the start_line and end_line you want to replace
- Provide new_content to replace those lines

Best practices:
- Use read_file first to verify line numbers; they shift after every edit
- For small, targeted edits, use edit_file instead""",
    "delete_file": """\
Delete a file from the filesystem.

Removes the file from both memory and persistence (if applicable).
Files in read-only directories cannot be deleted. A directory can be
deleted once it is empty.""",
    "move_file": """\
Moves or renames a file or directory to a new path.

Usage:
- Provide the current path (old_path) and the desired new path (new_path)
- Works for both files and directories (moves all children too)
- Use this to rename files or reorganize the directory structure
- The target path must not already exist

Examples (call with a JSON object matching the schema):
- Rename a file: {"old_path": "/draft.txt", "new_path": "/final.txt"}
- Move to a directory: {"old_path": "/notes.txt", "new_path": "/archive/notes.txt"}
- Rename a directory: {"old_path": "/drafts", "new_path": "/published"}""",
}

DISPLAY_TEXT: dict[str, str] = {
    "ls": "Listing files",
    "read_file": "Reading file",
    "write_file": "Writing file",
    "edit_file": "Editing file",
    "search_text": "Searching files",
    "edit_lines": "Editing file lines",
    "delete_file": "Deleting file",
    "move_file": "Moving file",
}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_PATH = {"type": "string", "description": "Path to the file, e.g. '/notes.txt'"}
SCHEMAS: dict[str, dict[str, Any]] = {
    "ls": _schema(
        {
            "pattern": {
                "type": "string",
                "maxLength": MAX_PATTERN_CHARS,
                "description": "Optional wildcard pattern to filter files (e.g., "
                "'*summary*', '*.md', '/Chapter 1/*')",
            }
        },
        [],
    ),
    "read_file": _schema(
        {
            "file_path": {**_PATH, "description": "Path to the file to read"},
            "offset": {
                "type": "integer",
                "minimum": 0,
                "default": 0,
                "description": "Line number to start reading from (0-based)",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "default": DEFAULT_READ_LIMIT,
                "description": "Maximum number of lines to read",
            },
        },
        ["file_path"],
    ),
    "write_file": _schema(
        {
            "file_path": {
                **_PATH,
                "description": "Path where the file should be written",
            },
            "content": {
                "type": "string",
                "description": "Content to write to the file",
            },
        },
        ["file_path", "content"],
    ),
    "edit_file": _schema(
        {
            "file_path": {**_PATH, "description": "Path to the file to edit"},
            "old_string": {
                "type": "string",
                "description": "String to find and replace (must be unique unless "
                "replace_all is true)",
            },
            "new_string": {
                "type": "string",
                "description": "String to replace old_string with",
            },
            "replace_all": {
                "type": "boolean",
                "default": False,
                "description": "If true, replace all occurrences. If false, require "
                "exactly one match.",
            },
        },
        ["file_path", "old_string", "new_string"],
    ),
    "search_text": _schema(
        {
            "pattern": {
                "type": "string",
                "maxLength": MAX_PATTERN_CHARS,
                "description": "Text or regex pattern (RE2 syntax) to search for",
            },
            "file_path": {
                "type": "string",
                "description": "Optional: specific file to search. If omitted, "
                "searches all files.",
            },
            "case_sensitive": {
                "type": "boolean",
                "default": True,
                "description": "Whether the search should be case-sensitive",
            },
            "context_lines": {
                "type": "integer",
                "minimum": 0,
                "maximum": 20,
                "default": 0,
                "description": "Number of lines before and after each match to show",
            },
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": 1000,
                "default": 50,
                "description": "Maximum number of matches to return",
            },
        },
        ["pattern"],
    ),
    "edit_lines": _schema(
        {
            "file_path": {**_PATH, "description": "Path to the file to edit"},
            "start_line": {
                "type": "integer",
                "description": "Starting line number (1-based, inclusive)",
            },
            "end_line": {
                "type": "integer",
                "description": "Ending line number (1-based, inclusive)",
            },
            "new_content": {
                "type": "string",
                "description": "New content to replace the line range. Can be "
                "multi-line.",
            },
        },
        ["file_path", "start_line", "end_line", "new_content"],
    ),
    "delete_file": _schema(
        {"file_path": {**_PATH, "description": "Path to the file to delete"}},
        ["file_path"],
    ),
    "move_file": _schema(
        {
            "old_path": {
                "type": "string",
                "description": "Current path of the file or directory to move",
            },
            "new_path": {
                "type": "string",
                "description": "New path for the file or directory",
            },
        },
        ["old_path", "new_path"],
    ),
}
