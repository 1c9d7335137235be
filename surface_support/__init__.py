"""What more than one surface needs and the core does not: answers that arrive from another
process (approval watching), pairing of messaging users, and the interactive set-up.

May import ``toolsets`` and ``core``; imports no surface.
"""
