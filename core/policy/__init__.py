"""Approvals: modes, rules and the broker that asks the user, and the command grader (shell
parsing, per-program rules and tables) that says what a command reads, writes and reaches.

May import ``host``, ``models``, ``store`` and the ground modules.
"""
