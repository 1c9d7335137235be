"""What more than one surface needs and the core does not: answers that arrive from another
process (approval watching), pairing of messaging users, the interactive set-up, and the
configuration read as a long-running server reads it (an error to show, not a crash), and a
quiet end on Ctrl-C.

May import ``toolsets`` and ``core``; imports no surface.
"""
