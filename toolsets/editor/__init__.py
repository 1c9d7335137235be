"""The editor tools: files, search, commands, undo (which toolsets hold them: ``toolsets.TOOLSETS``)."""

from toolsets.editor.edits import edit_file
from toolsets.editor.files import delete_file, move_file, read_file, write_file
from toolsets.editor.history import undo
from toolsets.editor.patch import apply_patch
from toolsets.editor.search import glob, grep, list_dir
from toolsets.editor.shell import command_output, run_command, stop_command

__all__ = [
    "apply_patch",
    "command_output",
    "delete_file",
    "edit_file",
    "glob",
    "grep",
    "list_dir",
    "move_file",
    "read_file",
    "run_command",
    "stop_command",
    "undo",
    "write_file",
]
