"""``GET …/events`` over a real socket (uvicorn, in process and as ``workspacefs serve``), on SQLite and a real
PostgreSQL: every change arrives once, a dropped connection resumed with ``Last-Event-ID`` loses nothing and
repeats nothing while writes go on, and with PostgreSQL a change made through another ``serve`` process
arrives too. No timing is asserted: events are counted, with generous timeouts."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn

from workspacefs import SqlStore
from workspacefs.server import create_app
from workspacefs.server._events import StreamPlaces
from workspacefs.server.tokens import TokenStore
from workspacefs.testing._events import EventClient, ServerEvent
from workspacefs.testing._service import free_port, running_service

AGENT = "agent-e"


@contextmanager
def serving(store: SqlStore, *, keepalive: float | None = None, streams: int | None = None) -> Iterator[str]:
    """The service on ``store`` under uvicorn on a loopback port, in this process (``streams``: per token)."""
    app = create_app(store)
    if keepalive is not None:
        app.state.event_keepalive = keepalive
    if streams is not None:
        app.state.workspacefs.stream_places = StreamPlaces(streams)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        app.state.workspacefs.stopping.set()
        server.should_exit = True
        thread.join(60)
        assert not thread.is_alive(), "uvicorn did not stop with an event stream open"


class Session:
    """A fresh session of the agent, its API and its event stream."""

    def __init__(self, url: str, token: str, session: str | None = None) -> None:
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}"}
        self.api = httpx.Client(base_url=url, headers=self.headers, timeout=60)
        self.session = session or f"e-{uuid.uuid4().hex[:10]}"
        self.base = f"/v1/agents/{AGENT}/sessions/{self.session}"
        if session is None:
            assert self.api.post(f"/v1/agents/{AGENT}/sessions", json={"id": self.session}).status_code == 201

    def events(self, last_event_id: str | None = None, **query: str) -> EventClient:
        headers = dict(self.headers)
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        params = "&".join(f"{k}={v}" for k, v in query.items())
        client = EventClient(self.url + self.base + "/events" + (f"?{params}" if params else ""), headers)
        assert client.status == 200, client.response.read()
        return client

    def write(self, path: str, content: str) -> None:
        answer = self.api.put(self.base + f"/fs{path}", json={"content": content})
        if answer.status_code == 404:
            answer = self.api.post(self.base + f"/fs{path}", json={"content": content})
        assert answer.status_code in (200, 201), answer.text

    def changes(self) -> list[tuple[int, int]]:
        """Every change of the journal as ``(entry_id, index)``, oldest first."""
        entries = self.api.get(self.base + "/history", params={"limit": 1000}).json()["data"]
        return [(e["entry_id"], i) for e in reversed(entries) for i in range(len(e["changes"]))]

    def close(self) -> None:
        self.api.close()


def key(event: ServerEvent) -> tuple[int, int]:
    assert event.id is not None
    entry, _, index = event.id.partition(":")
    assert (int(entry), int(index)) == (event.data["entry_id"], event.data["index"])
    return int(entry), int(index)


@pytest.fixture
def token(store: SqlStore) -> str:
    return TokenStore(store).create(agent_id=AGENT)[0]


def test_each_change_arrives_once_with_its_actor(store: SqlStore, token: str) -> None:
    with serving(store) as url:
        ws = Session(url, token)
        with ws.events() as stream:
            ws.write("/a.txt", "one")
            created = stream.next()
            assert created.event == "change"
            assert created.data["kind"] == "created" and created.data["path"] == "/a.txt"
            assert created.data["actor"]["name"] == AGENT and created.data["actor"]["via"] == "rest"
            assert created.data["operation"] == "write" and created.data["entry_id"] == ws.changes()[0][0]
            moved = ws.api.post(ws.base + "/fs/_/move", json={"src_path": "/a.txt", "dst_path": "/d/b.txt"})
            assert moved.status_code == 200, moved.text
            seen = {(e.data["kind"], e.data["path"]) for e in stream.take(len(ws.changes()) - 1)}
            assert ("moved", "/d/b.txt") in seen
            assert sorted(key(e) for e in [created]) == ws.changes()[:1]
        ws.close()


def test_a_dropped_stream_resumed_with_last_event_id_loses_and_repeats_nothing(store: SqlStore, token: str) -> None:
    total = 60
    with serving(store) as url:
        ws = Session(url, token)
        received: list[tuple[int, int]] = []
        stream = ws.events()
        done = threading.Event()

        def writer() -> None:
            for n in range(total):
                ws.write(f"/dir{n % 3}/f{n}.txt", f"{n}\n")
                if n % 10 == 9:  # an operation of several changes: a tree copy
                    copied = ws.api.post(
                        ws.base + "/fs/_/copy", json={"src_path": f"/dir{n % 3}", "dst_path": f"/copy{n}"}
                    )
                    assert copied.status_code == 200, copied.text
            done.set()

        thread = threading.Thread(target=writer)
        thread.start()
        for _round in range(4):  # drop three times mid-stream, while the writer goes on
            received += [key(e) for e in stream.take(8)]
            stream.drop()
            last = f"{received[-1][0]}:{received[-1][1]}"
            stream = ws.events(last_event_id=last)
        thread.join(120)
        assert done.is_set()
        expected = ws.changes()
        while len(received) < len(expected):
            received.append(key(stream.next()))
        stream.drop()
        assert received == expected  # in order, nothing missing, nothing twice
        ws.close()


def test_resume_from_a_whole_entry_and_a_path_filter(store: SqlStore, token: str) -> None:
    with serving(store) as url:
        ws = Session(url, token)
        ws.write("/src/a.py", "a")
        ws.write("/docs/b.md", "b")
        first = ws.changes()[-1][0]  # the newest entry: docs/b.md
        ws.write("/src/c.py", "c")
        with ws.events(last_event_id=str(first), path="/src") as stream:
            [backlog] = stream.take(1)
            assert backlog.data["path"] == "/src/c.py"
            ws.write("/docs/ignored.md", "x")
            ws.write("/src/d.py", "d")
            assert stream.next().data["path"] == "/src/d.py"
        bad = EventClient(url + ws.base + "/events", {**ws.headers, "Last-Event-ID": "yesterday"})
        assert bad.status == 400
        ws.close()


def test_keepalive_comments_and_the_end_of_a_stream(store: SqlStore, token: str) -> None:
    with serving(store, keepalive=0.2) as url:
        ws = Session(url, token)
        stream = ws.events()
        deadline = time.monotonic() + 60
        while "keep-alive" not in stream.comments:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert "connected" in stream.comments
        unauthenticated = EventClient(url + ws.base + "/events")
        assert unauthenticated.status == 401
        ws.close()
        # the server stops with this stream still open: serving() asserts that uvicorn's thread ends


def test_a_revoked_token_or_a_deleted_session_ends_the_stream(store: SqlStore) -> None:
    tokens = TokenStore(store)
    secret, info = tokens.create(agent_id=AGENT)
    with serving(store, keepalive=0.2) as url:
        ws = Session(url, secret)
        stream = ws.events()
        tokens.revoke(info.token_id)
        with pytest.raises(EOFError):
            while True:
                stream.next()
        other = Session(url, tokens.create(agent_id=AGENT)[0])
        stream = other.events()
        assert other.api.delete(other.base).status_code == 204
        with pytest.raises(EOFError):
            while True:
                stream.next()
        ws.close()
        other.close()


def test_a_revoked_token_loses_a_busy_stream_too(store: SqlStore) -> None:
    """The check at each keep-alive never came while changes kept arriving (each reset the quiet time): a stream
    of a busy session went on for ever after its token was revoked. Counted, not timed: the writer stops after
    1,000 writes 20 ms apart (20 s and more; the keep-alive is 1 s), and the stream must end while it still writes
    (130-170 writes on a loaded machine)."""
    tokens = TokenStore(store)
    secret, info = tokens.create(agent_id=AGENT)
    with serving(store, keepalive=1.0) as url:
        ws = Session(url, secret)
        writer = Session(url, tokens.create(agent_id=AGENT)[0], session=ws.session)
        stream = ws.events()
        writer.write("/first.txt", "before")
        assert stream.next().data["path"] == "/first.txt"
        tokens.revoke(info.token_id)
        ended = threading.Event()
        written: list[int] = []

        def write() -> None:
            for n in range(1000):
                if ended.is_set():
                    return
                writer.write(f"/busy/{n}.txt", str(n))
                written.append(n)
                time.sleep(0.02)

        thread = threading.Thread(target=write)
        thread.start()
        try:
            with pytest.raises(EOFError):
                while True:
                    stream.next()
            assert len(written) < 1000, "the stream outlived its token for as long as the session was busy"
        finally:
            ended.set()
            thread.join(120)
        ws.close()
        writer.close()


def test_one_token_holds_a_bounded_number_of_streams(store: SqlStore) -> None:
    """Each stream holds a thread and a watcher for as long as it lasts: one token could open them without end
    (1,200 a minute under its rate) and hold every thread the process can start, for every other tenant too."""
    tokens = TokenStore(store)
    greedy, other = tokens.create(agent_id=AGENT)[0], tokens.create(agent_id=AGENT)[0]
    with serving(store, streams=3) as url:
        ws = Session(url, greedy)
        held = [ws.events() for _ in range(3)]
        refused = EventClient(url + ws.base + "/events", ws.headers)
        assert refused.status == 429
        assert b"too_many_streams" in refused.response.read()
        theirs = Session(url, other, session=ws.session).events()  # another token has places of its own
        held.pop().close()  # a closed stream gives its place back
        deadline = time.monotonic() + 60
        while (again := EventClient(url + ws.base + "/events", ws.headers)).status != 200:
            again.response.read()  # refused (the server had not yet seen the close): ask again
            assert time.monotonic() < deadline, "the closed stream's place was not given back"
            time.sleep(0.05)
        ws.write("/a.txt", "seen")
        assert again.next().data["path"] == "/a.txt" and theirs.next().data["path"] == "/a.txt"
        for stream in (*held, again, theirs):
            stream.close()
        ws.close()


def test_serve_stops_with_a_stream_open(fast_tmp: Path) -> None:
    url = f"sqlite:///{fast_tmp / f'events-stop-{uuid.uuid4().hex[:8]}.db'}"
    with running_service(url) as service:
        assert service.token is not None
        ws = Session(service.url, service.token)
        stream = ws.events()
        ws.write("/a.txt", "a")
        stream.next()
        service.process.send_signal(signal.SIGINT)
        service.process.wait(60)  # uvicorn waits for open connections: the stream must end by itself
        with pytest.raises(EOFError):
            while True:
                stream.next()
        ws.close()
    assert service.process.returncode >= 0  # it exited (as on any Ctrl-C), not killed by a signal


def test_another_serve_process_on_postgresql_is_heard(postgres_url: str) -> None:
    """Two ``workspacefs serve`` processes on one PostgreSQL: a write through one reaches the other's stream
    (the SQL journal's LISTEN/NOTIFY)."""
    store = SqlStore(postgres_url)
    secret = TokenStore(store).create(agent_id=AGENT)[0]
    store.close()
    with running_service(postgres_url) as first, running_service(postgres_url) as second:
        ours = Session(first.url, secret)
        theirs = Session(second.url, secret, session=ours.session)
        with ours.events() as stream:
            for n in range(5):
                theirs.write(f"/remote{n}.txt", "from the other process")
            got = [stream.next() for _ in range(5)]
        assert [e.data["path"] for e in got] == [f"/remote{n}.txt" for n in range(5)]
        assert [key(e) for e in got] == ours.changes()
        ours.close()
        theirs.close()
