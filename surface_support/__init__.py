"""What more than one surface needs and the core does not: answers that arrive from another
process (approval watching), pairing of messaging users, the interactive set-up, and the
configuration read as a long-running server reads it (an error to show, not a crash).

May import ``toolsets`` and ``core``; imports no surface.
"""
