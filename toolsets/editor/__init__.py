"""The editor toolset: what ACP sessions get."""

from toolsets.editor.edits import edit_file
from toolsets.editor.files import delete_file, move_file, read_file, write_file
from toolsets.editor.history import undo
from toolsets.editor.patch import apply_patch
from toolsets.editor.search import glob, grep, list_dir
from toolsets.editor.shell import command_output, run_command, stop_command

# The order is the order of the tool schemas in every request: keep it stable.
__all__ = [
    "read_file",
    "edit_file",
    "write_file",
    "apply_patch",
    "delete_file",
    "move_file",
    "grep",
    "glob",
    "list_dir",
    "run_command",
    "command_output",
    "stop_command",
    "undo",
]
