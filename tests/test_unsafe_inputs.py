"""Names and regular expressions a hostile caller sends (issue 14): a typed error with a clear message on every
surface, and no pattern ever compiled without a bound on the memory it takes.

Memory is checked without timing anything: the library, the tool and the command run in a child process whose
address space is capped (``RLIMIT_AS``), so an unbounded compile would fail with ``MemoryError`` instead of the
expected refusal; the live service's peak resident memory is read from ``/proc``.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from workspacefs import InMemoryFilesystem
from workspacefs.archive import UnsafeArchiveError, import_tar
from workspacefs.errors import PatternTooLargeError, UnsafeNameError
from workspacefs.search import MAX_FALLBACK_PROGRAM_SIZE, GrepPattern, fallback_program_size
from workspacefs.testing._service import ServiceProcess, peak_rss_bytes, running_service
from workspacefs.tools import ToolContext, dispatch

MIB = 1024 * 1024

PATTERNS_TOO_LARGE = {
    "re2_refuses_the_counts": "(?:(?:a{1000}){1000}){3}",  # the report: 1 GB, never released
    "lookaround_nested": "(?=a)(?:(?:a{1000}){1000}){100}",  # only the fallback can run it; 26 GB unbounded
}
HEADROOM = 512 * MIB
"""Address space a child may add after start-up: far below what an unbounded compile of the patterns takes."""

# Run in a child: warm up (imports, the fallback engine), cap the address space, then try the pattern through
# the library and through the tool layer. Prints what each raised or returned.
_LIBRARY_AND_TOOL = """
import json, resource, sys
from workspacefs import InMemoryFilesystem
from workspacefs.errors import PatternTooLargeError
from workspacefs.tools import ToolContext, dispatch

fs = InMemoryFilesystem()
fs.write("a.txt", "a" * 100 + "\\n")
assert fs.grep("(?<=a)a") and dispatch("grep", json.dumps({"pattern": "(?<=a)a"}), ToolContext(filesystem=fs)).success
with open("/proc/self/status") as status:
    size = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (size + int(sys.argv[2]), size + int(sys.argv[2])))
try:
    fs.grep(sys.argv[1])
except PatternTooLargeError:
    print("library: PatternTooLargeError")
result = dispatch("grep", json.dumps({"pattern": sys.argv[1]}), ToolContext(filesystem=fs))
print(f"tool: {result.success} {result.error_code}")
print(result.message)
"""

# ``python -m workspacefs`` with its address space capped from the start.
_CAPPED_CLI = (
    "import resource, runpy, sys; limit = int(sys.argv.pop(1)); "
    "resource.setrlimit(resource.RLIMIT_AS, (limit, limit)); "
    "runpy.run_module('workspacefs', run_name='__main__', alter_sys=True)"
)
CLI_ADDRESS_SPACE = 768 * MIB
"""The whole command's address space: it needs about 40 MB; the patterns, compiled unbounded, 1 GB and more."""


# --- regular expressions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", PATTERNS_TOO_LARGE.values(), ids=PATTERNS_TOO_LARGE.keys())
def test_library_and_tool_refuse_in_bounded_memory(pattern: str) -> None:
    child = subprocess.run(
        [sys.executable, "-c", _LIBRARY_AND_TOOL, pattern, str(HEADROOM)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-2000:]  # a MemoryError here: the compile was not bounded
    lines = child.stdout.splitlines()
    assert lines[:2] == ["library: PatternTooLargeError", "tool: False pattern_too_large"]
    assert "too large" in lines[2] and "Use a smaller pattern" in lines[2]


@pytest.mark.parametrize("pattern", PATTERNS_TOO_LARGE.values(), ids=PATTERNS_TOO_LARGE.keys())
def test_cli_refuses_in_bounded_memory(pattern: str, fast_tmp: Path) -> None:
    root = fast_tmp / f"cli-pattern-{uuid.uuid4().hex[:8]}"
    root.mkdir()
    (root / "a.txt").write_text("a" * 100 + "\n")
    command = [sys.executable, "-c", _CAPPED_CLI, str(CLI_ADDRESS_SPACE), "grep", pattern, "--fs", f"file://{root}"]
    child = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert child.returncode == 6, child.stderr[-2000:]  # invalid input; a MemoryError would exit 1
    assert "too large" in child.stderr
    as_json = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=300, check=False)
    assert json.loads(as_json.stderr)["error"]["code"] == "pattern_too_large"


@pytest.fixture(scope="module")
def service(fast_tmp: Path) -> Iterator[ServiceProcess]:
    with running_service(f"sqlite:///{fast_tmp / f'unsafe-{uuid.uuid4().hex}.db'}", auth=False) as running:
        yield running


@pytest.fixture
def files_url(service: ServiceProcess) -> str:
    session = httpx.post(f"{service.url}/v1/agents/a/sessions").json()["id"]
    return f"{service.url}/v1/agents/a/sessions/{session}/fs"


def test_service_refuses_in_bounded_memory(service: ServiceProcess, files_url: str) -> None:
    assert httpx.post(f"{files_url}/a.txt", json={"content": "a" * 100 + "\n"}).status_code == 201
    assert httpx.post(f"{files_url}/_/grep", json={"pattern": "(?<=a)a"}).status_code == 200  # warm up
    before = peak_rss_bytes(service.pid)
    for pattern in PATTERNS_TOO_LARGE.values():
        response = httpx.post(f"{files_url}/_/grep", json={"pattern": pattern}, timeout=300)
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == "pattern_too_large" and "too large" in error["message"]
    growth = peak_rss_bytes(service.pid) - before
    assert growth < 64 * MIB, f"the server's peak memory grew by {growth / MIB:.0f} MiB"  # unbounded: 1 GB


def test_the_bound_counts_what_the_fallback_would_compile() -> None:
    # from the regex module's own parse: the body of x{m} is copied m + 1 times, nested counts multiply
    assert fallback_program_size("a{10}") == fallback_program_size("(?x) a {10}") >= 11
    assert 11 * 11 <= fallback_program_size("(?:a{10}){10}") <= 2 * 11 * 11
    assert fallback_program_size("(?:a{1,1000}){10}") < 100  # only the minimum count is copied
    assert fallback_program_size("[[:]{1000}(?:a{1000}){1000}:]]") > MAX_FALLBACK_PROGRAM_SIZE
    assert fallback_program_size("x" * (MAX_FALLBACK_PROGRAM_SIZE + 1)) > MAX_FALLBACK_PROGRAM_SIZE


@pytest.mark.parametrize(
    "pattern",
    [
        "(?i)(?:(?:ab){1000}){1000}(?=c)",
        "(?:a{1000}|b{1000}){1000}(?<!x)",
        "(?V1)[[a-z]--[aeiou]](?:a{100}){1000}(?=x)",
        r"(a)(?:\1{1000}){1000}",
        "(?:(?>a{1000})){1000}",
        "(?:(?:a{1000}){e<=1}){1000}",
    ],
)
def test_no_syntax_of_the_fallback_hides_a_repetition(pattern: str) -> None:
    with pytest.raises(PatternTooLargeError):
        GrepPattern(pattern)


# --- names --------------------------------------------------------------------------------------------------


DECOMPOSED, COMPOSED, OVERRIDE = "cafe\u0301.txt", "caf\u00e9.txt", "invoice\u202etxt.exe"


def test_service_explains_unsafe_names(files_url: str) -> None:
    decomposed = httpx.post(f"{files_url}/{quote(DECOMPOSED)}", json={"content": "x"})
    assert decomposed.status_code == 400
    error = decomposed.json()["error"]
    assert error["code"] == "unsafe_name"
    assert "NFC" in error["message"] and "'caf\u00e9.txt'" in error["message"]  # the spelling that works
    override = httpx.post(f"{files_url}/{quote(OVERRIDE)}", json={"content": "x"})
    assert override.status_code == 400
    assert override.json()["error"]["code"] == "unsafe_name" and "U+202E" in override.json()["error"]["message"]
    assert httpx.post(f"{files_url}/{quote(COMPOSED)}", json={"content": "x"}).status_code == 201
    assert [entry["name"] for entry in httpx.get(files_url).json()["data"]] == [COMPOSED]


def test_tool_explains_unsafe_names() -> None:
    context = ToolContext(filesystem=InMemoryFilesystem())
    result = dispatch("write_file", json.dumps({"path": "cafe\u0301.txt", "content": "x"}), context)
    assert not result.success and result.error_code == "unsafe_name"
    assert "NFC" in result.message and "'caf\u00e9.txt'" in result.message


def test_archive_import_names_the_unsafe_member() -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in ("first.txt", "docs/cafe\u0301.txt"):
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    buffer.seek(0)
    fs = InMemoryFilesystem()
    with pytest.raises(UnsafeArchiveError) as caught:
        import_tar(fs, buffer)
    assert "docs/cafe" in str(caught.value) and "NFC" in str(caught.value)
    assert list(fs.list()) == []  # all or nothing


def test_unsafe_name_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        InMemoryFilesystem().write("a\u2066b.txt", "x")
    assert issubclass(UnsafeNameError, ValueError)
