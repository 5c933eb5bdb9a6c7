"""How ``workspacefs serve`` listens: the address is bound before anything else starts, so a busy port is one
clear line and its own exit code (7), never a trace after "startup complete"; uvicorn then serves on that socket,
and a start it gives up on is reported too (uvicorn's own exit 3 would read as "not found" here).
"""

from __future__ import annotations

import errno
import socket
from typing import Any

from workspacefs.cli._output import EXIT_DENIED, EXIT_FAILURE, EXIT_INVALID, fail

__all__ = ["EXIT_ADDRESS_IN_USE", "browsable_host", "listen", "run_uvicorn"]

EXIT_ADDRESS_IN_USE = 7
"""``serve``: something already listens on the address (another service, or an earlier one still running)."""
_BIND_EXITS = {
    errno.EADDRINUSE: (EXIT_ADDRESS_IN_USE, "address_in_use"),
    errno.EACCES: (EXIT_DENIED, "permission_denied"),
    errno.EPERM: (EXIT_DENIED, "permission_denied"),
    errno.EADDRNOTAVAIL: (EXIT_INVALID, "address_not_available"),
}
"""Exit code and error code of each way binding can fail (by ``errno``); anything else exits 1."""
_ADVICE = {
    EXIT_ADDRESS_IN_USE: "stop what uses it or choose another --port",
    EXIT_DENIED: "ports below 1024 need privileges: choose another --port",
    EXIT_INVALID: "this machine has no such address: check --host",
}


def _shown(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def browsable_host(host: str) -> str:
    """The host a browser on this machine reaches a service listening on ``host`` by (not ``0.0.0.0``)."""
    unspecified = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # noqa: S104 - a lookup, not a bind
    return unspecified.get(host, host)


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening (connections wait in its backlog until uvicorn serves),
    or one line on stderr and exit 7 for a busy address (5 not allowed, 6 no such address, 1 otherwise)."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        fail(EXIT_FAILURE, "cannot_listen", f"cannot listen on {_shown(host, port)}: {exc.strerror or exc}")
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a restart reuses a closing port
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        code, kind = _BIND_EXITS.get(exc.errno or 0, (EXIT_FAILURE, "cannot_listen"))
        if isinstance(exc, socket.gaierror):
            code, kind = EXIT_INVALID, "address_not_available"
        reason = exc.strerror or str(exc)
        advice = f" ({_ADVICE[code]})" if code in _ADVICE else ""
        fail(code, kind, f"cannot listen on {_shown(host, port)}: {reason}{advice}")
    sock.set_inheritable(True)
    return sock


def run_uvicorn(app: Any, sock: socket.socket, *, host: str, log_level: str) -> None:
    """Serve ``app`` on ``sock`` until interrupted; a start uvicorn gives up on exits 1 with one line."""
    import uvicorn  # noqa: PLC0415 - the server extra

    port = int(sock.getsockname()[1])
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=log_level == "debug")
    stopping = getattr(getattr(getattr(app, "state", None), "workspacefs", None), "stopping", None)

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if stopping is not None:  # open event streams end, so uvicorn's wait for connections does
                stopping.set()
            super().handle_exit(sig, frame)

    server = _Server(config)
    try:
        server.run(sockets=[sock])
    except SystemExit as exc:  # uvicorn exits 3 when the application's startup fails
        if exc.code not in (0, None) and not server.started:
            fail(EXIT_FAILURE, "startup_failed", "the server did not start (see the messages above)")
        raise
    except OSError as exc:
        fail(EXIT_FAILURE, "cannot_listen", f"cannot serve on {_shown(host, port)}: {exc.strerror or exc}")
    finally:
        sock.close()
    if not server.started and not server.should_exit:
        fail(EXIT_FAILURE, "startup_failed", "the server did not start (see the messages above)")
