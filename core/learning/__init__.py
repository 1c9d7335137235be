"""What persists between sessions and what enters a prompt from disk: project context (AGENTS.md),
SOUL.md, memory, skills and their curator, screening of learned text, the gate that learning
writes pass, and history compression.

May import ``tools``, ``policy``, ``host``, ``models``, ``store`` and the ground modules.
"""
