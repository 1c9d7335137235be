"""The state store: sessions, messages (with full-text search), approvals and rules, in SQLite.

Nothing here touches the disk until :meth:`SessionStore.open` is awaited.
"""

from core.store.records import ApprovalRecord, ApprovalStatus, RuleDecision, SearchHit, SessionRecord, StoredMessage, Surface
from core.store.sessions import SessionNotFoundError, SessionStore, StoreOpenError

__all__ = [
    "ApprovalRecord",
    "ApprovalStatus",
    "RuleDecision",
    "SearchHit",
    "SessionNotFoundError",
    "SessionRecord",
    "SessionStore",
    "StoreOpenError",
    "StoredMessage",
    "Surface",
]
