"""Skills from elsewhere: search, install, update, pin and remove skills kept in git repositories,
local folders and agentskills.io-style JSON indexes.

What was installed, from where and at which commit lives in ``skills/.hub.json`` in the state
home (see :mod:`core.learning.hub.state`), beside the pins that keep a skill as it is: a pinned
skill is never updated by ``skills update`` and never touched by the curator.

Everything fetched is hostile until screened (:mod:`core.learning.hub.screen`): nothing is
written before every file passed. Importing this package is cheap (git loads on first fetch).
"""

from __future__ import annotations

from core.learning.hub.state import HubError, is_pinned, pin, pinned, record, records, unpin

__all__ = ["HubError", "is_pinned", "pin", "pinned", "record", "records", "unpin"]
