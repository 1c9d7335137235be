"""The editor toolset: what ACP sessions get."""

from toolsets.editor.files import edit_file, read_file, write_file
from toolsets.editor.search import grep, list_files
from toolsets.editor.shell import run_command

__all__ = ["edit_file", "grep", "list_files", "read_file", "run_command", "write_file"]
