"""Where commands and file writes happen: the local host, the OS sandbox around commands, and
checkpoints of the project's files.

May import ``models``, ``store`` and the ground modules.
"""
