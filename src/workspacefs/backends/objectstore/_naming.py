"""A missing bucket names the caller's path, never the bucket (DESIGN §3: nothing but the caller's path leaks).

The client knows keys, not paths: it raises :class:`BucketMissingError` naming nothing. Every public method of the
filesystem raises it again naming the path its caller gave (``path``, or ``src`` for a move or copy), so a caller never
reads the bucket, or an object's key, as if it were a file of theirs; the message says what the operator must fix.
"""

from __future__ import annotations

import errno
import functools
import inspect
from collections.abc import Callable
from typing import Any

from workspacefs.backends._objects._client import BucketMissingError

__all__ = ["BUCKET_GONE", "bucket_gone", "name_callers_paths"]

BUCKET_GONE = "The bucket configured for this filesystem does not exist"
_PATH_ARGUMENTS = ("path", "src")
_UNNAMED = frozenset({"close", "check_root", "grouped"})
"""Public methods left as they are: no request (``close``, ``grouped``), or the bucket is what the caller gave."""


def bucket_gone(path: str | None) -> BucketMissingError:
    """The error for the workspace's bucket missing, naming ``path`` (the caller's); still a ``FileNotFoundError``."""
    return BucketMissingError(errno.ENOENT, BUCKET_GONE, path)


def name_callers_paths(cls: type) -> None:
    """Wrap every public method of ``cls`` (its own and inherited) so that a missing bucket names the path its
    caller gave."""
    for name in dir(cls):
        member = inspect.getattr_static(cls, name)
        if name.startswith("_") or name in _UNNAMED or not inspect.isfunction(member):
            continue  # properties, class and static methods stay as they are
        setattr(cls, name, _naming(member))


def _naming(method: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(method)

    @functools.wraps(method)
    def named(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except BucketMissingError:
            raise bucket_gone(_callers_path(signature, args, kwargs)) from None

    return named


def _callers_path(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """The path argument of a call as its caller gave it (bound only on the error's way out)."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    found = next((bound.arguments[name] for name in _PATH_ARGUMENTS if name in bound.arguments), None)
    return found if isinstance(found, str) else None
