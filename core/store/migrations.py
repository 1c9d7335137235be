"""Schema migrations: an append-only list of named functions, applied in order.

Each applied migration is recorded by name in ``_migrations``. Never edit, rename or
reorder a migration that has shipped; add a new one at the end instead.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import aiosqlite

from core.store import db

__all__ = ["MIGRATIONS", "OWN_TEXT", "Migration", "applied_migrations", "migrate"]

Migration = Callable[[aiosqlite.Connection], Awaitable[None]]

MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next migration; its function name is its recorded name."""
    MIGRATIONS.append(fn)
    return fn


async def migrate(conn: aiosqlite.Connection) -> list[str]:
    """Apply every migration not yet recorded; returns the names applied by this call.

    All of it runs in one ``BEGIN IMMEDIATE`` transaction, so when several processes open a
    new database at once exactly one applies the schema and the others find it done.
    """

    async def body(conn: aiosqlite.Connection) -> list[str]:
        await conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
        done = set(await _names(conn))
        applied: list[str] = []
        for fn in MIGRATIONS:
            if fn.__name__ in done:
                continue
            await fn(conn)
            await conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (fn.__name__, time.time()))
            applied.append(fn.__name__)
        return applied

    return await db.write(conn, body)


async def applied_migrations(conn: aiosqlite.Connection) -> list[str]:
    """Names recorded in ``_migrations``, in the order they were applied."""
    return await db.read(conn, _names)


async def _names(conn: aiosqlite.Connection) -> list[str]:
    async with conn.execute("SELECT name FROM _migrations ORDER BY rowid") as cursor:
        return [row[0] for row in await cursor.fetchall()]


async def _run(conn: aiosqlite.Connection, statements: list[str]) -> None:
    # One execute per statement: executescript() would COMMIT the migration transaction first.
    for sql in statements:
        await conn.execute(sql)


@migration
async def m001_initial(conn: aiosqlite.Connection) -> None:
    # Enumerated columns (surface, role, status, decision) have no CHECK constraint on purpose:
    # SQLite cannot change a CHECK without rebuilding the table, and the store validates them.
    await _run(
        conn,
        [
            """
            CREATE TABLE sessions (
                id TEXT PRIMARY KEY,
                title TEXT,
                cwd TEXT NOT NULL,
                surface TEXT NOT NULL,
                model TEXT,
                parent_id TEXT REFERENCES sessions(id) ON DELETE SET NULL,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL,
                input_tokens INTEGER NOT NULL DEFAULT 0,
                output_tokens INTEGER NOT NULL DEFAULT 0,
                cache_read_tokens INTEGER NOT NULL DEFAULT 0,
                cache_write_tokens INTEGER NOT NULL DEFAULT 0,
                cost_usd REAL,
                meta TEXT NOT NULL DEFAULT '{}'
            )
            """,
            "CREATE INDEX sessions_updated ON sessions (updated_at)",
            "CREATE INDEX sessions_cwd_updated ON sessions (cwd, updated_at)",
            # Without it, deleting a session scans every row to null its forks' parent_id.
            "CREATE INDEX sessions_parent ON sessions (parent_id)",
            # An explicit INTEGER PRIMARY KEY keeps rowids stable (VACUUM may renumber implicit
            # ones), which the external-content FTS index depends on.
            """
            CREATE TABLE messages (
                id INTEGER PRIMARY KEY,
                session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
                seq INTEGER NOT NULL,
                role TEXT NOT NULL,
                content TEXT NOT NULL,
                text TEXT NOT NULL DEFAULT '',
                tool_name TEXT,
                created_at REAL NOT NULL,
                completed_at REAL
            )
            """,
            "CREATE UNIQUE INDEX messages_session_seq ON messages (session_id, seq)",
            """
            CREATE VIRTUAL TABLE messages_fts USING fts5 (
                text, content='messages', content_rowid='id', tokenize='porter unicode61'
            )
            """,
            """
            CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
                INSERT INTO messages_fts (rowid, text) VALUES (new.id, new.text);
            END
            """,
            # These triggers also fire for rows removed by ON DELETE CASCADE.
            """
            CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
                INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
            END
            """,
            """
            CREATE TRIGGER messages_fts_update AFTER UPDATE ON messages BEGIN
                INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
                INSERT INTO messages_fts (rowid, text) VALUES (new.id, new.text);
            END
            """,
            # session_id has no foreign key: a question can be asked for a session that is not
            # persisted (an MCP call without one, say); delete_session removes them explicitly.
            """
            CREATE TABLE approvals (
                id TEXT PRIMARY KEY,
                session_id TEXT NOT NULL,
                tool_call_id TEXT NOT NULL,
                tool_name TEXT NOT NULL,
                title TEXT NOT NULL,
                detail TEXT NOT NULL DEFAULT '{}',
                status TEXT NOT NULL DEFAULT 'pending',
                decided_by TEXT,
                created_at REAL NOT NULL,
                decided_at REAL
            )
            """,
            "CREATE INDEX approvals_session_status ON approvals (session_id, status)",
            "CREATE INDEX approvals_status ON approvals (status, created_at)",
            """
            CREATE TABLE approval_rules (
                project TEXT NOT NULL,
                tool TEXT NOT NULL,
                pattern TEXT NOT NULL,
                decision TEXT NOT NULL,
                created_at REAL NOT NULL,
                PRIMARY KEY (project, tool, pattern)
            )
            """,
        ],
    )


@migration
async def m002_gateway_cron_pairing(conn: aiosqlite.Connection) -> None:
    # The gateway's tables: scheduled jobs and their runs, pairing codes and the users they
    # admitted, and which conversation each chat is in. Runs are unique per (job, slot): that
    # constraint, inside BEGIN IMMEDIATE, is what keeps two gateways from running one slot.
    await _run(
        conn,
        [
            """
            CREATE TABLE cron_jobs (
                id TEXT PRIMARY KEY,
                name TEXT NOT NULL,
                schedule TEXT NOT NULL,
                timezone TEXT NOT NULL,
                prompt TEXT NOT NULL,
                project TEXT NOT NULL,
                mode TEXT NOT NULL DEFAULT 'read-only',
                chat_id INTEGER,
                thread_id INTEGER,
                paused INTEGER NOT NULL DEFAULT 0,
                created_at REAL NOT NULL,
                next_run_at REAL,
                last_run_at REAL
            )
            """,
            "CREATE INDEX cron_jobs_next ON cron_jobs (paused, next_run_at)",
            """
            CREATE TABLE cron_runs (
                id TEXT PRIMARY KEY,
                job_id TEXT NOT NULL REFERENCES cron_jobs(id) ON DELETE CASCADE,
                scheduled_at REAL NOT NULL,
                status TEXT NOT NULL,
                catch_up INTEGER NOT NULL DEFAULT 0,
                lease_owner TEXT,
                lease_until REAL,
                attempts INTEGER NOT NULL DEFAULT 0,
                started_at REAL,
                finished_at REAL,
                session_id TEXT,
                result TEXT,
                error TEXT,
                delivery_status TEXT NOT NULL DEFAULT 'none',
                delivery_attempts INTEGER NOT NULL DEFAULT 0,
                delivery_next_at REAL,
                delivery_error TEXT,
                UNIQUE (job_id, scheduled_at)
            )
            """,
            "CREATE INDEX cron_runs_status ON cron_runs (status, lease_until)",
            "CREATE INDEX cron_runs_delivery ON cron_runs (delivery_status, delivery_next_at)",
            """
            CREATE TABLE pairing_codes (
                code TEXT PRIMARY KEY,
                user_id INTEGER NOT NULL,
                chat_id INTEGER NOT NULL,
                name TEXT,
                status TEXT NOT NULL DEFAULT 'pending',
                created_at REAL NOT NULL,
                expires_at REAL NOT NULL
            )
            """,
            "CREATE TABLE pairing_attempts (at REAL NOT NULL, ok INTEGER NOT NULL)",
            """
            CREATE TABLE gateway_users (
                user_id INTEGER PRIMARY KEY,
                name TEXT,
                chat_id INTEGER,
                approved_at REAL NOT NULL
            )
            """,
            """
            CREATE TABLE gateway_chats (
                chat_key TEXT PRIMARY KEY,
                project TEXT,
                session_id TEXT,
                mode TEXT,
                updated_at REAL NOT NULL
            )
            """,
            """
            CREATE TABLE gateway_remote_approvals (
                approval_id TEXT PRIMARY KEY,
                chat_id INTEGER NOT NULL,
                message_id INTEGER,
                sent_at REAL NOT NULL
            )
            """,
        ],
    )


# Scripts written without spaces (Thai to Myanmar, CJK and Hangul, CJK compatibility): the
# unicode61 tokenizer sees a whole run as one token, so their words cannot be found.
_SPACELESS_SCRIPT = (
    "'*[' || char(3584) || '-' || char(4255) || char(11904) || '-' || char(55215) || char(63744) || '-' || char(64255) || ']*'"
)


@migration
async def m003_trigram_index(conn: aiosqlite.Connection) -> None:
    # A trigram index for messages in those scripts only: indexing every row would double the
    # store's size and its insert cost for the common (space-separated) case.
    await _run(
        conn,
        [
            "CREATE VIRTUAL TABLE messages_trigram USING fts5 (text, content='messages', content_rowid='id', tokenize='trigram')",
            f"""
            CREATE TRIGGER messages_trigram_insert AFTER INSERT ON messages WHEN new.text GLOB {_SPACELESS_SCRIPT} BEGIN
                INSERT INTO messages_trigram (rowid, text) VALUES (new.id, new.text);
            END
            """,
            f"""
            CREATE TRIGGER messages_trigram_delete AFTER DELETE ON messages WHEN old.text GLOB {_SPACELESS_SCRIPT} BEGIN
                INSERT INTO messages_trigram (messages_trigram, rowid, text) VALUES ('delete', old.id, old.text);
            END
            """,
            f"""
            CREATE TRIGGER messages_trigram_update_old AFTER UPDATE ON messages WHEN old.text GLOB {_SPACELESS_SCRIPT} BEGIN
                INSERT INTO messages_trigram (messages_trigram, rowid, text) VALUES ('delete', old.id, old.text);
            END
            """,
            f"""
            CREATE TRIGGER messages_trigram_update_new AFTER UPDATE ON messages WHEN new.text GLOB {_SPACELESS_SCRIPT} BEGIN
                INSERT INTO messages_trigram (rowid, text) VALUES (new.id, new.text);
            END
            """,
            f"INSERT INTO messages_trigram (rowid, text) SELECT id, text FROM messages WHERE text GLOB {_SPACELESS_SCRIPT}",
        ],
    )


@migration
async def m004_approval_always(conn: aiosqlite.Connection) -> None:
    # Whether an answer was "always": the asking process remembers it as a rule, wherever the
    # answer came from (another editor window, hermes-mcp, the gateway).
    await _run(conn, ["ALTER TABLE approvals ADD COLUMN always INTEGER NOT NULL DEFAULT 0"])


@migration
async def m005_cron_job_owner(conn: aiosqlite.Connection) -> None:
    # A job belongs to the chat user who made it (owner_id); NULL means it was made on the
    # machine (CLI, editor, MCP) and belongs to the gateway's owner, as every older job now does.
    # gateway_chats.turn_user is the user whose turn runs in that chat, so that a tool acting
    # during the turn (the cron tool) knows for whom.
    await _run(
        conn,
        [
            "ALTER TABLE cron_jobs ADD COLUMN owner_id INTEGER",
            "ALTER TABLE gateway_chats ADD COLUMN turn_user INTEGER",
            "CREATE INDEX pairing_codes_user ON pairing_codes (user_id, created_at)",
            "CREATE INDEX pairing_codes_pending ON pairing_codes (status, expires_at)",
        ],
    )


@migration
async def m006_gateway_session_starter(conn: aiosqlite.Connection) -> None:
    # Who started each session from the gateway: the chat user (and the chat) for a chat's
    # session, the job's maker for a cron run. A session without a row (editor, MCP, CLI, machine
    # jobs, and every gateway session from before this table) belongs to the gateway's owner.
    await _run(
        conn,
        [
            """
            CREATE TABLE gateway_sessions (
                session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
                user_id INTEGER NOT NULL,
                chat_key TEXT,
                origin TEXT NOT NULL,
                created_at REAL NOT NULL
            )
            """,
            "CREATE INDEX gateway_sessions_user ON gateway_sessions (user_id, created_at)",
        ],
    )


@migration
async def m007_cron_destinations(conn: aiosqlite.Connection) -> None:
    # A job's destinations besides the store and its chat (a JSON list of "file:PATH" and
    # "webhook:URL|NAME"; NULL: the [cron] deliver defaults), and how each run's result fared at
    # each destination: a retry goes only to those that have not taken it yet.
    await _run(
        conn,
        [
            "ALTER TABLE cron_jobs ADD COLUMN deliver TEXT",
            """
            CREATE TABLE cron_deliveries (
                run_id TEXT NOT NULL REFERENCES cron_runs(id) ON DELETE CASCADE,
                target TEXT NOT NULL,
                status TEXT NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                next_at REAL,
                error TEXT,
                delivered_at REAL,
                PRIMARY KEY (run_id, target)
            )
            """,
        ],
    )


@migration
async def m008_subagent_sessions(conn: aiosqlite.Connection) -> None:
    # A subagent's session: parent_id names the session whose turn ran it (as for forks and
    # summaries) and parent_call_id the tool call (delegate) that ran it, so that the parent's
    # replay finds its subagents by call; NULL for every other session.
    await _run(
        conn,
        [
            "ALTER TABLE sessions ADD COLUMN parent_call_id TEXT",
            "CREATE INDEX sessions_parent_call ON sessions (parent_id, parent_call_id) WHERE parent_call_id IS NOT NULL",
        ],
    )


@migration
async def m009_platform_identities(conn: aiosqlite.Connection) -> None:
    # Every chat platform shares the gateway's tables, so a user is an identity ("telegram:123",
    # "discord:456") and a chat a place key ("<platform>:<chat>:<thread or 0>"); what was stored so
    # far is Telegram's (user ids, "CHAT:THREAD" keys). Tables whose ids were INTEGER are rebuilt with
    # TEXT (gateway_users.user_id was the rowid itself). cron_jobs is altered in place: cron_runs
    # references it, and SQLite before 3.35 cannot drop a column, so chat_id and thread_id stay,
    # unused, beside the new chat_key, and the old owner_id is renamed telegram_owner_id.
    # gateway_links ties identities to one person (the identity they were linked to), so that a
    # person's sessions and jobs follow them across platforms; a link is made with a one-time code.
    user = "'telegram:' || {0}"
    maybe_user = "CASE WHEN {0} IS NULL THEN NULL ELSE 'telegram:' || {0} END"
    direct = "CASE WHEN {0} IS NULL THEN NULL ELSE 'telegram:' || {0} || ':0' END"
    await _run(
        conn,
        [
            """
            CREATE TABLE pairing_codes_new (
                code TEXT PRIMARY KEY,
                user_id TEXT NOT NULL,
                chat_key TEXT NOT NULL,
                name TEXT,
                status TEXT NOT NULL DEFAULT 'pending',
                created_at REAL NOT NULL,
                expires_at REAL NOT NULL
            )
            """,
            f"INSERT INTO pairing_codes_new SELECT code, {user.format('user_id')}, {direct.format('chat_id')}, name, status,"
            " created_at, expires_at FROM pairing_codes",
            "DROP TABLE pairing_codes",
            "ALTER TABLE pairing_codes_new RENAME TO pairing_codes",
            "CREATE INDEX pairing_codes_user ON pairing_codes (user_id, created_at)",
            "CREATE INDEX pairing_codes_pending ON pairing_codes (status, expires_at)",
            """
            CREATE TABLE gateway_users_new (
                user_id TEXT PRIMARY KEY NOT NULL,
                name TEXT,
                chat_key TEXT,
                approved_at REAL NOT NULL
            )
            """,
            f"INSERT INTO gateway_users_new SELECT {user.format('user_id')}, name, {direct.format('chat_id')}, approved_at FROM gateway_users",
            "DROP TABLE gateway_users",
            "ALTER TABLE gateway_users_new RENAME TO gateway_users",
            """
            CREATE TABLE gateway_chats_new (
                chat_key TEXT PRIMARY KEY NOT NULL,
                project TEXT,
                session_id TEXT,
                mode TEXT,
                updated_at REAL NOT NULL,
                turn_user TEXT
            )
            """,
            f"INSERT INTO gateway_chats_new SELECT {user.format('chat_key')}, project, session_id, mode, updated_at,"
            f" {maybe_user.format('turn_user')} FROM gateway_chats",
            "DROP TABLE gateway_chats",
            "ALTER TABLE gateway_chats_new RENAME TO gateway_chats",
            "CREATE INDEX gateway_chats_session ON gateway_chats (session_id)",
            """
            CREATE TABLE gateway_sessions_new (
                session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
                user_id TEXT NOT NULL,
                chat_key TEXT,
                origin TEXT NOT NULL,
                created_at REAL NOT NULL
            )
            """,
            f"INSERT INTO gateway_sessions_new SELECT session_id, {user.format('user_id')}, {maybe_user.format('chat_key')}, origin,"
            " created_at FROM gateway_sessions WHERE session_id IN (SELECT id FROM sessions)",
            "DROP TABLE gateway_sessions",
            "ALTER TABLE gateway_sessions_new RENAME TO gateway_sessions",
            "CREATE INDEX gateway_sessions_user ON gateway_sessions (user_id, created_at)",
            """
            CREATE TABLE gateway_remote_approvals_new (
                approval_id TEXT PRIMARY KEY,
                chat_key TEXT NOT NULL,
                message_id TEXT,
                sent_at REAL NOT NULL
            )
            """,
            f"INSERT INTO gateway_remote_approvals_new SELECT approval_id, {direct.format('chat_id')}, message_id, sent_at"
            " FROM gateway_remote_approvals",
            "DROP TABLE gateway_remote_approvals",
            "ALTER TABLE gateway_remote_approvals_new RENAME TO gateway_remote_approvals",
            "ALTER TABLE cron_jobs ADD COLUMN chat_key TEXT",
            "UPDATE cron_jobs SET chat_key = 'telegram:' || chat_id || ':' || coalesce(thread_id, 0) WHERE chat_id IS NOT NULL",
            "ALTER TABLE cron_jobs RENAME COLUMN owner_id TO telegram_owner_id",
            "ALTER TABLE cron_jobs ADD COLUMN owner_id TEXT",
            f"UPDATE cron_jobs SET owner_id = {user.format('telegram_owner_id')} WHERE telegram_owner_id IS NOT NULL",
            # A run's chat destination was "chat:CHAT" (the job's thread implied): now "chat:<place key>".
            """
            UPDATE cron_deliveries SET target = 'chat:telegram:' || substr(target, 6) || ':' || coalesce(
                (SELECT j.thread_id FROM cron_runs r JOIN cron_jobs j ON j.id = r.job_id
                 WHERE r.id = cron_deliveries.run_id AND j.chat_id = CAST(substr(cron_deliveries.target, 6) AS INTEGER)), 0)
            WHERE target GLOB 'chat:*[0-9]*' AND substr(target, 6) NOT GLOB '*[^0-9-]*'
            """,
            """
            CREATE TABLE gateway_links (
                identity TEXT PRIMARY KEY NOT NULL,
                person TEXT NOT NULL,
                linked_at REAL NOT NULL
            )
            """,
            "CREATE INDEX gateway_links_person ON gateway_links (person)",
            """
            CREATE TABLE gateway_link_codes (
                code TEXT PRIMARY KEY NOT NULL,
                identity TEXT NOT NULL,
                created_at REAL NOT NULL,
                expires_at REAL NOT NULL,
                used INTEGER NOT NULL DEFAULT 0
            )
            """,
            "CREATE INDEX gateway_link_codes_identity ON gateway_link_codes (identity, used, expires_at)",
            # Wrong link codes per identity, so that guessing one is stopped after a few tries.
            "CREATE TABLE gateway_link_attempts (identity TEXT NOT NULL, at REAL NOT NULL)",
            "CREATE INDEX gateway_link_attempts_identity ON gateway_link_attempts (identity, at)",
        ],
    )


# A message's own text, read from its JSON: a tool result's output, a summary's text, or the
# first part's text. It is the search text of most messages (one text part, or a tool output),
# which then need not be stored a second time.
OWN_TEXT = "coalesce(json_extract({0}, '$.content'), json_extract({0}, '$.text'), json_extract({0}, '$.parts[0].text'), '')"


@migration
async def m010_search_text_stored_once(conn: aiosqlite.Connection) -> None:
    # The search text was stored beside the message's JSON, most often the same characters
    # twice (a third of the store). ``text`` becomes a column computed from ``body`` (the search
    # text, kept only when it is not the message's own text: tool calls, several parts) or, when
    # ``own_text`` is 1, from ``content``. The FTS5 tables read ``text`` as before, so nothing is
    # re-indexed; rows written before keep their body (own_text 0). The triggers re-index only
    # when the text changes, so that marking an old row own_text (and emptying its body) costs
    # the index nothing.
    triggers = [
        "messages_fts_insert",
        "messages_fts_delete",
        "messages_fts_update",
        "messages_trigram_insert",
        "messages_trigram_delete",
        "messages_trigram_update_old",
        "messages_trigram_update_new",
    ]
    changed = "old.text IS NOT new.text"
    await _run(
        conn,
        [
            *(f"DROP TRIGGER {name}" for name in triggers),
            "ALTER TABLE messages RENAME COLUMN text TO body",
            "ALTER TABLE messages ADD COLUMN own_text INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE messages ADD COLUMN text TEXT GENERATED ALWAYS AS"
            f" (CASE WHEN own_text THEN {OWN_TEXT.format('content')} ELSE body END) VIRTUAL",
            """
            CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
                INSERT INTO messages_fts (rowid, text) VALUES (new.id, new.text);
            END
            """,
            """
            CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
                INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
            END
            """,
            f"""
            CREATE TRIGGER messages_fts_update AFTER UPDATE ON messages WHEN {changed} BEGIN
                INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
                INSERT INTO messages_fts (rowid, text) VALUES (new.id, new.text);
            END
            """,
            f"""
            CREATE TRIGGER messages_trigram_insert AFTER INSERT ON messages WHEN new.text GLOB {_SPACELESS_SCRIPT} BEGIN
                INSERT INTO messages_trigram (rowid, text) VALUES (new.id, new.text);
            END
            """,
            f"""
            CREATE TRIGGER messages_trigram_delete AFTER DELETE ON messages WHEN old.text GLOB {_SPACELESS_SCRIPT} BEGIN
                INSERT INTO messages_trigram (messages_trigram, rowid, text) VALUES ('delete', old.id, old.text);
            END
            """,
            f"""
            CREATE TRIGGER messages_trigram_update_old AFTER UPDATE ON messages
            WHEN {changed} AND old.text GLOB {_SPACELESS_SCRIPT} BEGIN
                INSERT INTO messages_trigram (messages_trigram, rowid, text) VALUES ('delete', old.id, old.text);
            END
            """,
            f"""
            CREATE TRIGGER messages_trigram_update_new AFTER UPDATE ON messages
            WHEN {changed} AND new.text GLOB {_SPACELESS_SCRIPT} BEGIN
                INSERT INTO messages_trigram (rowid, text) VALUES (new.id, new.text);
            END
            """,
        ],
    )


@migration
async def m011_cron_job_kind(conn: aiosqlite.Connection) -> None:
    # What a job runs: 'agent' (its prompt, as an agent turn) or a built-in job's own code
    # ('curator'). A built-in kind has at most one job, so gateways that sync it at once never
    # make two.
    await _run(
        conn,
        [
            "ALTER TABLE cron_jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'agent'",
            "CREATE UNIQUE INDEX cron_jobs_builtin_kind ON cron_jobs(kind) WHERE kind != 'agent'",
        ],
    )


@migration
async def m012_search_words(conn: aiosqlite.Connection) -> None:
    # The words of the search index, for history search to expand a ``prefix*`` into them
    # (core.store.history): an fts5vocab table over messages_fts, one row per occurrence, so
    # that a look-up of the first word from a point on reads a page, not a word's whole list.
    # It stores nothing (it reads the index), so adding it costs nothing on any store size.
    await _run(conn, ["CREATE VIRTUAL TABLE messages_fts_words USING fts5vocab(messages_fts, instance)"])
