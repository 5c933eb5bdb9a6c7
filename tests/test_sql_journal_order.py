"""The SQL journal's watchers on PostgreSQL when transactions commit out of sequence order.

A journal row takes its ``seq`` when it is inserted, but becomes visible when its transaction commits: a
slow transaction can commit after a faster one that took a later ``seq``. The listener publishes the rows
after the last ``seq`` it published, so a row committed late, behind a later one, is never published: a
watcher (and so an SSE client, and an MCP subscriber) missed that change. Found while building the event
stream; fixed by reaching back past the last rows published (``_TRAIL``) and skipping those.
"""

from __future__ import annotations

import uuid

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.backends.sql._journal import JournalTag, insert_changes
from workspacefs.history import Actor, Change


def test_a_change_committed_behind_a_later_one_still_reaches_watchers(postgres_url: str) -> None:
    store = SqlStore(postgres_url)
    session = f"order-{uuid.uuid4().hex[:8]}"
    fs = SqlFilesystem(store, session)
    watcher = fs.watch("/")
    try:
        with store.engine.connect() as slow:
            transaction = slow.begin()
            tag = JournalTag(uuid.uuid4().hex, "write", Actor("slow"), None, None)
            insert_changes(slow, tag, session, [Change("slow.txt", None, None, 0, 0)])  # seq n, not committed
            fs.write("fast.txt", "fast")  # seq n+1, committed first
            first = watcher.next_event(30)
            assert first is not None and first.path == "fast.txt"
            transaction.commit()
        late = watcher.next_event(10)
        assert late is not None and late.path == "slow.txt"
    finally:
        watcher.close()
        store.close()
