"""``open_filesystem(url)``: one factory for every backend, with a small scheme registry.

Modelled on fsspec's registry: a private mutable table, a read-only public view, lazy
``"module:attribute"`` targets so optional backends cost nothing until used, an install hint when
an extra is missing, and third-party registration through the ``workspacefs.backends`` entry point.
"""

from __future__ import annotations

import errno
import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from workspacefs.protocol import Filesystem
from workspacefs.quota import QUOTA_URL_PARAMETERS, Quota

__all__ = ["BackendSpec", "display_url", "open_filesystem", "register_backend", "registered_backends", "url_parameters"]

Opener = Callable[[str, dict[str, str]], Filesystem]
"""Builds a filesystem from the full URL and its query parameters."""


@dataclass(frozen=True, slots=True)
class BackendSpec:
    """A registered scheme: an opener (or its ``"module:attribute"`` path) and an install hint."""

    target: str | Opener
    install_hint: str | None = None

    def resolve(self) -> Opener:
        """Import the opener if it was registered by name."""
        if not isinstance(self.target, str):
            return self.target
        module_name, _, attribute = self.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            hint = f" ({self.install_hint})" if self.install_hint else ""
            raise ImportError(f"The backend {self.target!r} is not available: {exc}{hint}") from exc
        opener: Opener = getattr(module, attribute)
        return opener


_registry: dict[str, BackendSpec] = {}
_entry_points_loaded = False


def register_backend(
    scheme: str, target: str | Opener, *, install_hint: str | None = None, replace: bool = False
) -> None:
    """Register ``scheme`` (``"memory"``, ``"s3"`` …); ``target`` is an opener or ``"module:attribute"``."""
    scheme = scheme.lower()
    if scheme in _registry and not replace:
        raise ValueError(f"Scheme {scheme!r} is already registered (pass replace=True to override)")
    _registry[scheme] = BackendSpec(target, install_hint)


def registered_backends() -> Mapping[str, BackendSpec]:
    """Read-only view of the registered schemes."""
    _load_entry_points()
    return MappingProxyType(_registry)


def _load_entry_points() -> None:
    global _entry_points_loaded  # noqa: PLW0603 - loaded once per process, on first use
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points  # noqa: PLC0415 - costs ~15 ms: only when a URL is opened

    for entry in entry_points(group="workspacefs.backends"):
        if entry.name not in _registry:
            _registry[entry.name] = BackendSpec(entry.value)


_SECRET_PARAMETERS = frozenset({"key", "secret", "token", "password", "access_key", "secret_key", "sas_token"})
"""Query parameters whose values are credentials (``s3://…?key=…&secret=…``)."""


def display_url(url: str) -> str:
    """``url`` fit for a message or a log: its password and the values of credential parameters shown as ``***``
    (a query value that is itself a URL, such as ``content_store=`` or a composite's mount, shown the same way).

    Every message that repeats a URL a user gave goes through this: a password in a URL must not reach a
    terminal, a log or an HTTP response because the URL had a typo.
    """
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<a URL that does not parse>"
    netloc = parts.netloc
    userinfo, at, host = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.partition(':')[0]}:***@{host}"
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    shown = [(k, "***" if k.lower() in _SECRET_PARAMETERS else display_url(v) if "://" in v else v) for k, v in pairs]
    query = urlencode(shown, safe="/:@*{}") if shown != pairs else parts.query
    if netloc == parts.netloc and query == parts.query:
        return url
    # by hand: urlunsplit drops the empty host of sqlite:/// and composite://
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")


def url_parameters(url: str) -> dict[str, str]:
    """The query parameters of ``url``, each given once: a repeated one is refused, never decided by order
    (``?read_only=true&read_only=false`` opened a writable workspace).

    Raises:
        ValueError: a parameter appears more than once.
    """
    found: dict[str, str] = {}
    for key, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        if key in found:
            raise ValueError(f"The query parameter {key!r} is given more than once in {display_url(url)!r}")
        found[key] = value
    return found


def _local_path(url: str) -> str:
    """The absolute local path a ``file://`` or ``composite://`` URL names, as written: no ``.`` or ``..``
    segments, so a check of the URL's prefix (``file:///srv/agents/``) holds for the directory opened."""
    path = unquote(urlsplit(url).path)
    if not path.startswith("/"):
        raise ValueError(f"The URL needs an absolute path, got {display_url(url)!r}")
    if any(segment in (".", "..") for segment in path.split("/")):
        raise ValueError(f"The URL's path may not contain '.' or '..' segments: {display_url(url)!r}")
    return path


def query_flag(params: Mapping[str, str], name: str, default: bool = False) -> bool:
    """A boolean query parameter: ``1/true/yes/on`` or ``0/false/no/off``."""
    value = params.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"Query parameter {name}={value!r} must be true or false")


def open_filesystem(url: str, **options: Any) -> Filesystem:
    """Open the filesystem a URL names: ``memory://``, ``file:///dir``, ``sqlite:///f.db?session=…``, ``postgresql://…``,
    ``s3://bucket/prefix?endpoint_url=…``.

    Common query parameters: ``read_only=true``, ``mount_point=/workspace``, a quota (``quota_bytes=``,
    ``quota_files=``, ``quota_file_bytes=``), and ``create=``: whether to make a workspace that does not exist
    yet (a SQL database file and session, default true; a ``file://`` directory, default false). With
    ``create=false`` a missing one raises ``FileNotFoundError`` and nothing is written, so a reader never
    makes a workspace out of a typo. Keyword ``options`` override query parameters.

    Raises:
        ValueError: no scheme, or an unknown one.
        FileNotFoundError: the workspace does not exist and ``create`` is false.
        ImportError: the backend needs an extra that is not installed (the message says which).
    """
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"Expected a URL such as 'memory://', got {display_url(url)!r}")
    scheme = urlsplit(url).scheme.lower()
    _load_entry_points()
    spec = _registry.get(scheme)
    if spec is None:
        known = ", ".join(sorted(f"{name}://" for name in _registry))
        raise ValueError(f"Unknown filesystem scheme {scheme!r}; known: {known}")
    params = url_parameters(url)
    params.update({key: str(value) for key, value in options.items()})
    opener = spec.resolve()
    try:
        return opener(url, params)
    except ModuleNotFoundError as exc:  # an optional dependency the backend imports on first use
        if spec.install_hint is None:
            raise
        raise ImportError(
            f"The {scheme}:// backend needs {exc.name or exc}, which is not installed; {spec.install_hint}"
        ) from exc


def _check_options(scheme: str, params: Mapping[str, str], allowed: set[str]) -> None:
    unknown = set(params) - allowed - set(QUOTA_URL_PARAMETERS)  # every scheme takes a quota
    if unknown:
        raise ValueError(f"Unknown option(s) for {scheme}: {', '.join(sorted(unknown))}")


def _quota(params: Mapping[str, str]) -> Quota | None:
    """The quota a URL's ``quota_bytes``/``quota_files``/``quota_file_bytes`` name, if any."""
    return Quota.from_url_parameters(params)


def _open_memory(_url: str, params: dict[str, str]) -> Filesystem:
    from workspacefs.backends.memory import InMemoryFilesystem  # noqa: PLC0415 - imported on first use

    _check_options("memory://", params, {"read_only", "mount_point", "create"})
    return InMemoryFilesystem(
        read_only=query_flag(params, "read_only"), mount_point=params.get("mount_point"), quota=_quota(params)
    )


def _open_host(url: str, params: dict[str, str]) -> Filesystem:
    """``file:///abs/dir?read_only=true&snapshot_strategy=git&snapshot_dir=/x``."""
    from workspacefs.backends.host import HostFilesystem  # noqa: PLC0415 - imported on first use

    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise ValueError(f"file:// URLs name a local directory; got host {urlsplit(display_url(url)).netloc!r}")
    root = _local_path(url)
    _check_options(
        "file://", params, {"read_only", "mount_point", "snapshot_strategy", "snapshot_dir", "durable", "create"}
    )
    if query_flag(params, "create") and not os.path.lexists(root):
        os.makedirs(root, exist_ok=True)
    return HostFilesystem(
        root,
        read_only=query_flag(params, "read_only"),
        mount_point=params.get("mount_point"),
        snapshot_strategy=params.get("snapshot_strategy"),
        snapshot_dir=params.get("snapshot_dir"),
        durable=query_flag(params, "durable", default=True),
        quota=_quota(params),
    )


def _open_sql(url: str, params: dict[str, str]) -> Filesystem:
    """``sqlite:///file.db?session=ID`` and ``postgresql://…?session=ID``; ``&content_store=s3%3A%2F%2F…``
    (percent-encoded) keeps chunks of ``content_store_min_bytes`` (default 256 KiB) or more in an object store."""
    from workspacefs.backends.sql import SqlFilesystem, missing_database  # noqa: PLC0415 - needs the sql extra

    session = params.get("session")
    if not session:
        raise ValueError(f"SQL URLs need a session: add ?session=ID to {display_url(url)!r}")
    _check_options(
        "a SQL filesystem",
        params,
        {"session", "read_only", "mount_point", "create", "content_store", "content_store_min_bytes", "history"}
        | {"history_entries"},
    )
    create = query_flag(params, "create", default=True)
    if not create and (absent := missing_database(url)) is not None:
        raise FileNotFoundError(errno.ENOENT, "No such database file", absent)
    fs = SqlFilesystem(
        url,
        session,
        read_only=query_flag(params, "read_only"),
        mount_point=params.get("mount_point"),
        create=create,
        quota=_quota(params),
    )
    if not create and fs.store.session(session) is None:
        fs.close()
        raise FileNotFoundError(errno.ENOENT, "No such session in this database", session)
    return fs


def _open_container(url: str, params: dict[str, str]) -> Filesystem:
    """``podman://IMAGE?network=false&memory=512m&cpus=1&pids_limit=256&user=…&host_dir=/x&snapshot_strategy=…``
    (and ``docker://IMAGE``): a new sandbox whose filesystem is returned; closing it removes the container."""
    from workspacefs.backends.container import ContainerSandbox  # noqa: PLC0415 - imported on first use

    parts = urlsplit(url)
    image = unquote(parts.netloc + parts.path)
    if not image:
        raise ValueError(f"{parts.scheme}:// URLs name an image, such as {parts.scheme}://localhost/tools:1")
    _check_options(
        f"{parts.scheme}://",
        params,
        {
            "workdir",
            "host_dir",
            "network",
            "memory",
            "cpus",
            "pids_limit",
            "user",
            "snapshot_strategy",
            "snapshot_dir",
            "create",
        },
    )
    sandbox = ContainerSandbox(
        image,
        runtime=parts.scheme,
        workdir=params.get("workdir", "/workspace"),
        host_dir=params.get("host_dir"),
        network=query_flag(params, "network"),
        memory=params.get("memory"),
        cpus=float(params["cpus"]) if "cpus" in params else None,
        pids_limit=int(params.get("pids_limit", "256")),
        user=params.get("user"),
        snapshot_strategy=params.get("snapshot_strategy"),
        snapshot_dir=params.get("snapshot_dir"),
        quota=_quota(params),
    )
    sandbox.filesystem.owns_sandbox()
    return sandbox.filesystem


def _open_s3(url: str, params: dict[str, str]) -> Filesystem:
    """``s3://bucket/prefix?endpoint_url=…&key=…&secret=…&region=…&snapshot_dir=bucket/prefix&create=false``.

    Credentials not given come from the usual AWS variables and files. ``create`` (default true, false when
    ``read_only``) makes the prefix's marker; a missing bucket is never created and always refused.
    ``history=off`` keeps no journal; ``history_entries=N`` keeps the newest N entries (default 10,000).
    """
    from workspacefs.backends.objectstore import ObjectStoreFilesystem, open_s3  # noqa: PLC0415 - the s3 extra

    parts = urlsplit(url)
    root = unquote(parts.netloc + parts.path)
    _check_options(
        "s3://",
        params,
        {"endpoint_url", "key", "secret", "token", "region", "anon", "snapshot_dir"}
        | {"read_only", "mount_point", "create", "history", "history_entries"},
    )
    try:
        entries = int(params.get("history_entries", "10000"))
    except ValueError:
        raise ValueError("history_entries must be a whole number of entries") from None
    read_only = query_flag(params, "read_only")
    fs: ObjectStoreFilesystem = open_s3(
        root,
        endpoint_url=params.get("endpoint_url"),
        key=params.get("key"),
        secret=params.get("secret"),
        token=params.get("token"),
        region=params.get("region"),
        anon=query_flag(params, "anon"),
        snapshot_dir=params.get("snapshot_dir"),
        read_only=read_only,
        mount_point=params.get("mount_point"),
        create=query_flag(params, "create", default=not read_only),
        quota=_quota(params),
        history=query_flag(params, "history", default=True),
        history_entries=entries,
    )
    return fs


_MAX_NESTING = 4
"""Composite descriptions may name composites, this deep at most (a file naming itself stops here)."""


def _open_composite(url: str, params: dict[str, str], depth: int = 0) -> Filesystem:
    """``composite:///abs/mounts.toml`` (or ``.json``): ``[mounts]`` maps each mount point to a URL, or to
    ``{url = "…", read_only = true}``. Or inline: ``composite://?/workspace=<percent-encoded URL>&/docs=…``.

    ``read_only`` and ``mount_point`` apply to the composite; ``create`` is passed to every mount whose own
    URL does not say. ``agent`` and ``session`` fill ``{agent}`` and ``{session}`` in the mounts' URLs (one
    description as the layout of many sessions: ``serve --sessions-root composite:///…``). A mount that fails
    to open closes the ones opened before it.
    """
    from workspacefs.backends.composite import CompositeFilesystem  # noqa: PLC0415 - imported on first use

    parts = urlsplit(url)
    described: dict[str, str | tuple[str, bool | None]] = {k: v for k, v in params.items() if k.startswith("/")}
    _check_options("composite://", {k: v for k, v in params.items() if k not in described}, _COMPOSITE_OPTIONS)
    if parts.path not in ("", "/"):
        if described:
            raise ValueError("A composite:// URL names a description file or lists mounts inline, not both")
        described = _read_mounts(_local_path(url))
    if not described:
        raise ValueError("A composite:// URL needs mounts: composite:///abs/mounts.toml or composite://?/a=<URL>")
    places: dict[str, str] = {key: params[key] for key in ("agent", "session") if key in params}
    if places and not any("{" in (s if isinstance(s, str) else s[0]) for s in described.values()):
        raise ValueError("agent= and session= fill {agent} and {session} in the mounts' URLs, and none has either")
    opened: dict[str, Filesystem] = {}
    try:
        for point, spec in described.items():
            opened[point] = _open_mount(point, spec, params, places, depth)
        return CompositeFilesystem(
            opened, read_only=query_flag(params, "read_only"), mount_point=params.get("mount_point")
        )
    except BaseException:
        for fs in opened.values():
            close = getattr(fs, "close", None)
            if callable(close):
                close()
        raise


def _open_mount(
    point: str, spec: str | tuple[str, bool | None], params: Mapping[str, str], places: Mapping[str, str], depth: int
) -> Filesystem:
    """One mount of a composite description: its URL with the places filled, ``read_only`` and ``create``."""
    child, read_only = (spec, None) if isinstance(spec, str) else spec
    for key, value in places.items():
        child = child.replace("{" + key + "}", value)
    options: dict[str, Any] = {} if read_only is None else {"read_only": str(read_only).lower()}
    if "create" in params and "create=" not in child:
        options["create"] = params["create"]
    if urlsplit(child).scheme.lower() != "composite":
        return open_filesystem(child, **options)
    if depth >= _MAX_NESTING:
        raise ValueError(f"Composite descriptions nest more than {_MAX_NESTING} deep at {point}")
    child_params = url_parameters(child) | options
    return _open_composite(child, child_params, depth + 1)


_COMPOSITE_OPTIONS = {"read_only", "mount_point", "create", "agent", "session"}


def _read_mounts(path: str) -> dict[str, str | tuple[str, bool | None]]:
    """The ``mounts`` table of a TOML or JSON description: mount point to URL (and read-only flag)."""
    import json  # noqa: PLC0415 - only for composite descriptions
    import tomllib  # noqa: PLC0415

    if not path.startswith("/"):
        raise ValueError(f"composite:// URLs name a description by absolute path, got {path!r}")
    with open(path, "rb") as handle:
        raw = handle.read()
    try:
        body = json.loads(raw) if path.endswith(".json") else tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "JSON" if path.endswith(".json") else "TOML"
        raise ValueError(f"{path} is not a valid {kind} description: {exc}") from None
    mounts = body.get("mounts") if isinstance(body, dict) else None
    if not isinstance(mounts, dict) or not mounts:
        raise ValueError(f"{path} needs a 'mounts' table mapping mount points to URLs")
    found: dict[str, str | tuple[str, bool | None]] = {}
    for point, spec in mounts.items():
        if isinstance(spec, str):
            found[point] = spec
        elif isinstance(spec, dict) and isinstance(spec.get("url"), str) and set(spec) <= {"url", "read_only"}:
            flag = spec.get("read_only")
            if flag is not None and not isinstance(flag, bool):
                raise ValueError(f"{path}: read_only of {point} must be true or false")
            found[point] = (spec["url"], flag)
        else:
            raise ValueError(f"{path}: the mount {point} must be a URL or {{url = '…', read_only = true}}")
    return found


register_backend("memory", _open_memory)
register_backend("podman", _open_container)
register_backend("docker", _open_container)
register_backend("file", _open_host)
_SQL_HINT = "pip install 'workspacefs[sql]' (and 'workspacefs[postgres]' for PostgreSQL)"
for _scheme in ("sqlite", "postgresql", "postgres"):
    register_backend(_scheme, _open_sql, install_hint=_SQL_HINT)
register_backend("s3", _open_s3, install_hint="pip install 'workspacefs[s3]'")
register_backend("composite", _open_composite)
