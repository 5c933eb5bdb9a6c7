"""The web file browser in a real headless Chromium (Debian's ``chromium``), driven by Playwright.

Each test works in its own session of one running service and checks what the page shows against what
the API stores: signing in (links, tokens, the cookie, a new tab), Back and Forward, the layout from 1280 down
to 360 pixels, and the API docs with the internet out of reach. Screenshots are saved under ``test-artifacts/``.
"""

from __future__ import annotations

import base64
import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from conftest import missing
from playwright import sync_api as playwright_api
from playwright.sync_api import Page, expect

from workspacefs import SqlStore
from workspacefs.server import TokenStore
from workspacefs.testing._service import ServiceProcess, running_service

CHROMIUM_FLAGS = [
    "--no-sandbox",  # the tests run as root in CI, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
ARTIFACTS = Path(os.environ.get("WORKSPACEFS_ARTIFACTS", Path(__file__).resolve().parent.parent / "test-artifacts"))
AGENT = "browser-agent"
BROWSER_HEADER = {"X-Workspacefs": "1"}


def chromium_path() -> str | None:
    """Debian's Chromium (``apt-get install chromium``), or one named by ``WORKSPACEFS_CHROMIUM``."""
    for candidate in (os.environ.get("WORKSPACEFS_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('browser') / 'browser.db'}"


@pytest.fixture(scope="module")
def service(database: str) -> Iterator[ServiceProcess]:
    with running_service(database) as running:
        assert running.token is not None
        yield running


@pytest.fixture(scope="module")
def mint(database: str) -> Iterator[object]:
    """Sign-in links as ``workspacefs open`` makes them: a one-time code in the service's database."""
    store = SqlStore(database)
    tokens = TokenStore(store)
    yield lambda base: f"{base}/#signin={tokens.mint_signin()}"
    store.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    executable = chromium_path()
    if executable is None:
        missing("Chromium is not installed (apt-get install chromium)")
    with playwright_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


class Workspace:
    """One session of the service, seen through the API (to arrange and to check) and through a page."""

    def __init__(self, service: ServiceProcess, page: Page) -> None:
        self.service = service
        self.page = page
        self.api = httpx.Client(base_url=service.url, headers=service.headers(), timeout=30)
        self.session = f"ui-{uuid.uuid4().hex[:10]}"
        assert self.api.post(f"/v1/agents/{AGENT}/sessions", json={"id": self.session}).status_code == 201
        self.dialogs: list[str] = []
        self.accept_dialogs = False
        page.on("dialog", self._dialog)
        sign_in(page, service)

    def _dialog(self, dialog: object) -> None:
        self.dialogs.append(getattr(dialog, "message", "?"))
        if self.accept_dialogs:
            dialog.accept()  # type: ignore[attr-defined]
        else:
            dialog.dismiss()  # type: ignore[attr-defined]

    def fs(self, path: str) -> str:
        return f"/v1/agents/{AGENT}/sessions/{self.session}/fs/{quote(path.lstrip('/'), safe='/')}"

    def put_file(self, path: str, content: str | bytes, **extra: object) -> None:
        if isinstance(content, bytes):
            body = {"content": base64.b64encode(content).decode(), "encoding": "base64", **extra}
        else:
            body = {"content": content, **extra}
        response = self.api.post(self.fs(path), json=body)
        assert response.status_code == 201, response.text

    def content(self, path: str) -> str | None:
        response = self.api.get(self.fs(path))
        return response.json()["content"] if response.status_code == 200 else None

    def open(self, path: str = "/") -> None:
        """Load the browser on this session at ``path``."""
        self.page.goto(f"{self.service.url}/#{AGENT}/{self.session}{path}")
        expect(self.page.locator("body[data-ready=true]")).to_have_count(1)

    def entry(self, name: str) -> object:
        return self.page.get_by_test_id("entry").filter(has_text=name).first

    def entry_names(self) -> list[str]:
        return self.page.get_by_test_id("entry").all_inner_texts()

    def expect_entries(self, names: list[str]) -> None:
        """Wait until the listing shows exactly ``names``, in order."""
        expect(self.page.get_by_test_id("entry")).to_have_text(names)


def sign_in(page: Page, service: ServiceProcess) -> None:
    """Sign the page's browser context in with the admin token, as the sign-in dialog does (a cookie)."""
    answer = page.request.post(f"{service.url}/v1/signin", data={"token": service.token}, headers=BROWSER_HEADER)
    assert answer.status == 200, answer.text()


def ready(page: Page) -> None:
    expect(page.locator("body[data-ready=true]")).to_have_count(1)


@pytest.fixture
def ws(service: ServiceProcess, browser: object) -> Iterator[Workspace]:
    context = browser.new_context(accept_downloads=True, viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    page.set_default_timeout(15_000)
    workspace = Workspace(service, page)
    yield workspace
    workspace.api.close()
    context.close()


def test_the_printed_sign_in_link_signs_the_browser_in_for_every_tab(
    service: ServiceProcess, browser: object, mint: object
) -> None:
    link = mint(service.url)  # type: ignore[operator]
    context = browser.new_context()  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(link)
    ready(page)
    assert "signin" not in page.evaluate("location.href")  # taken out of the address bar at once
    assert page.evaluate("document.cookie") == ""  # HttpOnly: no script on the page can read it
    assert page.evaluate("sessionStorage.length + localStorage.length") == 0
    expect(page.get_by_test_id("sign-out")).to_be_visible()
    expect(page.get_by_test_id("token-dialog")).to_be_hidden()
    (cookie,) = context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
    second = context.new_page()  # a new tab is signed in too
    second.goto(service.url + "/")
    ready(second)
    expect(second.get_by_test_id("token-dialog")).to_be_hidden()
    context.close()

    again = browser.new_context()  # type: ignore[attr-defined]
    used = again.new_page()
    used.goto(link)  # a link works once
    expect(used.get_by_test_id("token-dialog")).to_be_visible()
    expect(used.get_by_test_id("token-error")).to_contain_text("already used")
    assert "signin" not in used.evaluate("location.href")
    again.close()


def test_a_link_pasted_into_an_open_tab_signs_it_in(service: ServiceProcess, browser: object, mint: object) -> None:
    context = browser.new_context()  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(service.url + "/")
    expect(page.get_by_test_id("token-dialog")).to_be_visible()
    page.evaluate("window.sameDocument = true")
    page.get_by_test_id("token-cancel").click()
    page.goto(mint(service.url))  # type: ignore[operator]  # only the fragment changes: no reload, a hashchange
    ready(page)
    expect(page.get_by_test_id("token-dialog")).to_be_hidden()
    expect(page.get_by_test_id("sign-out")).to_be_visible()
    assert page.evaluate("window.sameDocument") is True
    assert "signin" not in page.evaluate("location.href")
    page.get_by_test_id("sign-out").click()  # signing out revokes the cookie: a reload asks again
    expect(page.get_by_test_id("token-dialog")).to_be_visible()
    page.reload()
    expect(page.get_by_test_id("token-dialog")).to_be_visible()
    page.goto(f"{service.url}/#token={service.token}")  # a #token= link works the same way
    ready(page)
    expect(page.get_by_test_id("token-dialog")).to_be_hidden()
    assert "token" not in page.evaluate("location.href")
    context.close()


def test_without_a_sign_in_the_page_asks_for_a_link_or_a_token(
    service: ServiceProcess, browser: object, mint: object
) -> None:
    context = browser.new_context()  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(service.url + "/")
    expect(page.get_by_test_id("token-dialog")).to_be_visible()
    page.get_by_test_id("token-input").fill("wsfs_not_a_token")
    page.get_by_test_id("token-ok").click()
    expect(page.get_by_test_id("token-error")).to_contain_text("Unknown or revoked token")
    page.get_by_test_id("token-input").fill(service.token or "")
    page.get_by_test_id("token-ok").click()
    ready(page)
    expect(page.get_by_test_id("token-dialog")).to_be_hidden()
    context.close()
    context = browser.new_context()  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(service.url + "/")
    page.get_by_test_id("token-input").fill(mint(service.url))  # type: ignore[operator]  # a whole link
    page.get_by_test_id("token-ok").click()
    ready(page)
    expect(page.get_by_test_id("sign-out")).to_be_visible()
    context.close()


def test_browse_directories_and_view_a_file_with_line_numbers(ws: Workspace) -> None:
    ws.put_file("/src/app/main.py", "import os\n\nprint(os.getcwd())\n")
    ws.put_file("/README.md", "# Demo\n")
    ws.open()
    ws.expect_entries(["src/", "README.md"])
    ws.entry("src/").click()
    expect(ws.page.get_by_test_id("breadcrumbs")).to_contain_text("src")
    ws.entry("app/").click()
    expect(ws.page.get_by_test_id("breadcrumbs")).to_have_text(f"{ws.session}/src/app")
    ws.entry("main.py").click()
    expect(ws.page.get_by_test_id("file-name")).to_have_text("/src/app/main.py")
    expect(ws.page.locator("#gutter")).to_have_text("1\n2\n3")
    expect(ws.page.get_by_test_id("content")).to_have_text("import os\n\nprint(os.getcwd())")
    ws.page.get_by_test_id("breadcrumbs").get_by_text("src", exact=True).click()
    ws.expect_entries(["app/"])
    ws.page.get_by_test_id("breadcrumbs").get_by_text(ws.session, exact=True).click()
    ws.expect_entries(["src/", "README.md"])
    ws.page.reload()  # the address keeps the place
    expect(ws.page.locator("body[data-ready=true]")).to_have_count(1)
    ws.expect_entries(["src/", "README.md"])
    assert ws.dialogs == []


def test_create_a_file_edit_and_save_it(ws: Workspace) -> None:
    ws.open()
    ws.page.get_by_test_id("new-file").click()
    ws.page.get_by_test_id("name-input").fill("notes.txt")
    ws.page.get_by_test_id("name-ok").click()
    expect(ws.page.get_by_test_id("file-name")).to_have_text("/notes.txt")
    assert ws.content("/notes.txt") == ""
    ws.page.get_by_test_id("edit").click()
    ws.page.get_by_test_id("editor").fill("first line\nsecond line\n")
    ws.page.get_by_test_id("save").click()
    expect(ws.page.get_by_test_id("status")).to_contain_text("Saved /notes.txt")
    expect(ws.page.get_by_test_id("content")).to_have_text("first line\nsecond line")
    assert ws.content("/notes.txt") == "first line\nsecond line\n"
    ws.page.get_by_test_id("new-folder").click()
    ws.page.get_by_test_id("name-input").fill("assets")
    ws.page.get_by_test_id("name-ok").click()
    expect(ws.entry("assets/")).to_be_visible()
    assert ws.api.post(f"{ws.fs('/')[:-1]}/_/stat", json={"path": "/assets"}).json()["is_directory"] is True


def test_a_conflicting_save_is_shown_not_overwritten(ws: Workspace) -> None:
    ws.put_file("/shared.md", "original\n")
    ws.open("/shared.md")
    expect(ws.page.get_by_test_id("file-name")).to_have_text("/shared.md")
    ws.page.get_by_test_id("edit").click()
    ws.page.get_by_test_id("editor").fill("my edit\n")
    changed = ws.api.put(ws.fs("/shared.md"), json={"content": "someone else's edit\n"})
    assert changed.status_code == 200
    ws.page.get_by_test_id("save").click()
    expect(ws.page.get_by_test_id("conflict")).to_be_visible()
    assert ws.content("/shared.md") == "someone else's edit\n"
    assert ws.page.get_by_test_id("editor").input_value() == "my edit\n"  # nothing typed is lost
    ws.page.get_by_test_id("conflict-reload").click()
    expect(ws.page.get_by_test_id("content")).to_have_text("someone else's edit")
    expect(ws.page.get_by_test_id("conflict")).to_be_hidden()


def test_a_file_larger_than_a_json_body_is_saved(ws: Workspace) -> None:
    line = "a line of a large generated file, long enough to add up quickly\n"
    big = line * (4_600_000 // len(line))  # over the service's 4 MiB JSON limit: the save must go raw
    created = ws.api.post(ws.fs("/big.txt"), content=big.encode(), headers={"content-type": "application/octet-stream"})
    assert created.status_code == 201, created.text
    ws.open("/big.txt")
    expect(ws.page.get_by_test_id("file-name")).to_have_text("/big.txt")
    ws.page.get_by_test_id("edit").click()
    editor = ws.page.get_by_test_id("editor")
    editor.press("Control+Home")  # the whole file is in the editor; type at its start, as a person would
    ws.page.keyboard.type("edited first line\n")
    ws.page.get_by_test_id("save").click()
    expect(ws.page.get_by_test_id("status")).to_contain_text("Saved /big.txt")
    saved = ws.api.get(ws.fs("/big.txt"), headers={"accept": "application/octet-stream"})
    assert saved.content == ("edited first line\n" + big).encode()
    assert ws.dialogs == []


def test_delete_asks_first(ws: Workspace) -> None:
    ws.put_file("/old.log", "x")
    ws.put_file("/dir/inner.txt", "y")
    ws.open()
    ws.page.get_by_test_id("delete-entry").nth(1).click()  # old.log (folders are listed first)
    expect(ws.page.get_by_test_id("confirm-dialog")).to_contain_text("/old.log")
    ws.page.get_by_test_id("confirm-cancel").click()
    assert ws.content("/old.log") == "x"
    ws.page.get_by_test_id("delete-entry").nth(1).click()
    ws.page.get_by_test_id("confirm-ok").click()
    expect(ws.entry("old.log")).to_have_count(0)
    assert ws.content("/old.log") is None
    ws.page.get_by_test_id("delete-entry").first.click()
    expect(ws.page.get_by_test_id("confirm-dialog")).to_contain_text("everything in it")
    ws.page.get_by_test_id("confirm-ok").click()
    expect(ws.page.get_by_test_id("entry")).to_have_count(0)
    assert ws.api.get(ws.fs("/dir")).status_code == 404


def test_read_only_files_are_marked_and_not_editable(ws: Workspace) -> None:
    ws.put_file("/locked.cfg", "keep=1\n", is_readonly=True)
    ws.open("/locked.cfg")
    expect(ws.page.get_by_test_id("readonly-badge")).to_be_visible()
    expect(ws.page.get_by_test_id("edit")).to_be_disabled()
    ws.page.get_by_test_id("toggle-readonly").click()
    expect(ws.page.get_by_test_id("readonly-badge")).to_be_hidden()
    expect(ws.page.get_by_test_id("edit")).to_be_enabled()
    assert ws.api.post(f"{ws.fs('/')[:-1]}/_/stat", json={"path": "/locked.cfg"}).json()["is_readonly"] is False


def test_binary_files_are_offered_as_a_download(ws: Workspace) -> None:
    payload = b"\x89PNG\r\n\x1a\n\x00\x00" + os.urandom(2048)
    ws.put_file("/image.png", payload)
    ws.open("/image.png")
    expect(ws.page.get_by_test_id("binary")).to_contain_text("Binary file")
    expect(ws.page.get_by_test_id("viewer")).to_be_hidden()
    expect(ws.page.get_by_test_id("edit")).to_be_disabled()
    with ws.page.expect_download() as download_info:
        ws.page.get_by_test_id("download").click()
    download = download_info.value
    assert download.suggested_filename == "image.png"
    assert Path(download.path()).read_bytes() == payload


def test_snapshot_diff_and_restore(ws: Workspace) -> None:
    ws.put_file("/plan.md", "step one\n")
    ws.open("/plan.md")
    ws.page.get_by_test_id("snapshot-tag").fill("before-edit")
    ws.page.get_by_test_id("create-snapshot").click()
    expect(ws.page.get_by_test_id("snapshot")).to_have_count(1)
    expect(ws.page.get_by_test_id("snapshot-list")).to_contain_text("before-edit")
    ws.page.get_by_test_id("edit").click()
    ws.page.get_by_test_id("editor").fill("step one\nstep two\n")
    ws.page.get_by_test_id("save").click()
    expect(ws.page.get_by_test_id("content")).to_have_text("step one\nstep two")
    ws.put_file("/extra.txt", "added later")
    ws.page.get_by_test_id("diff-snapshot").click()
    expect(ws.page.get_by_test_id("diff-entry")).to_have_count(2)
    expect(ws.page.get_by_test_id("diff")).to_contain_text("modified/plan.md")
    expect(ws.page.get_by_test_id("diff")).to_contain_text("added/extra.txt")
    ws.page.get_by_test_id("restore-snapshot").click()
    ws.page.get_by_test_id("confirm-ok").click()
    expect(ws.page.get_by_test_id("content")).to_have_text("step one")
    assert ws.content("/plan.md") == "step one\n"
    assert ws.content("/extra.txt") is None


def test_names_and_contents_are_never_html(ws: Workspace) -> None:
    name = "<img src=x onerror=alert(1)>"
    hostile = "<script>alert(2)</script><img src=y onerror=alert(3)>\n"
    ws.put_file(f"/{name}", hostile)
    ws.put_file("/<b>bold<b>/<i>x<i>.txt", "plain")  # names hold no '/', so no closing tags here
    tag = "<img src=z onerror=alert(4)>"
    assert ws.api.post(f"/v1/agents/{AGENT}/sessions/{ws.session}/snapshots", json={"tag": tag}).status_code == 201
    ws.open()
    expect(ws.entry(name)).to_have_text(name)
    ws.expect_entries(["<b>bold<b>/", name])
    ws.entry(name).click()
    expect(ws.page.get_by_test_id("file-name")).to_have_text(f"/{name}")
    expect(ws.page.get_by_test_id("content")).to_have_text(hostile.rstrip("\n"))
    expect(ws.page.get_by_test_id("snapshot-list")).to_contain_text(tag)
    ws.page.get_by_test_id("breadcrumbs").get_by_text(ws.session, exact=True).click()
    ws.entry("<b>bold<b>/").click()
    expect(ws.page.get_by_test_id("breadcrumbs")).to_contain_text("<b>bold<b>")
    assert ws.page.locator("img, script:not([src]), b, i").count() == 0  # no element came from a name or content
    assert ws.dialogs == []  # and nothing ran
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ws.entry("<i>x<i>.txt").click()
    ws.page.screenshot(path=str(ARTIFACTS / "browser.png"), full_page=True)
    assert (ARTIFACTS / "browser.png").stat().st_size > 10_000


def test_a_held_change_is_approved_or_denied_in_the_page(ws: Workspace) -> None:
    ws.open()
    answers: list[httpx.Response] = []

    def agent_writes(path: str) -> threading.Thread:
        thread = threading.Thread(
            target=lambda: answers.append(ws.api.post(ws.fs(path), json={"content": "on: push\n"})), daemon=True
        )
        thread.start()
        return thread

    writing = agent_writes("/.github/workflows/ci.yml")
    expect(ws.page.get_by_test_id("approval-dialog")).to_be_visible()
    expect(ws.page.get_by_test_id("approval-text")).to_contain_text(f"session {ws.session}")
    expect(ws.page.get_by_test_id("approval-text")).to_contain_text("write /.github/workflows/ci.yml")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ws.page.screenshot(path=str(ARTIFACTS / "browser-approval.png"))
    ws.page.get_by_test_id("approval-approve").click()
    writing.join(30)
    assert answers[-1].status_code == 201, answers[-1].text
    assert ws.content("/.github/workflows/ci.yml") == "on: push\n"
    expect(ws.page.get_by_test_id("approval-dialog")).to_be_hidden()

    refused = agent_writes("/.git/hooks/pre-commit")
    expect(ws.page.get_by_test_id("approval-text")).to_contain_text("write /.git/hooks/pre-commit")
    ws.page.get_by_test_id("approval-deny").click()
    refused.join(30)
    assert answers[-1].status_code == 403 and "an admin declined it" in answers[-1].json()["error"]["message"]
    assert ws.content("/.git/hooks/pre-commit") is None


def marked(code: str) -> str:
    """How the page shows a hidden character: its code point between single angle quotes, in a box."""
    return f"\u2039U+{code}\u203a"


def test_hidden_and_bidirectional_characters_are_shown_not_obeyed(ws: Workspace) -> None:
    """Names may hold a zero-width space or a Unicode tag (paths refuse only bidirectional controls), and content
    anything: ``ci<U+200B>.yml`` reads as ``ci.yml``, and a line with ``<U+202E>`` shows its end reversed. The page
    shows each such character as its code point in a box, in names, paths, lines and a held change's target, so what
    a person reads and approves is what is stored; the editor keeps the real text. A name that spells a marker out
    gets no box, so it differs."""
    name = "ci\u200b.yml\U000e0041"
    content = "deploy: true \u202e# off\n"
    ws.put_file(f"/{name}", content)
    ws.put_file(f"/ci{marked('200B')}.yml", "spelt out")
    ws.open()
    shown = f"ci{marked('200B')}.yml{marked('E0041')}"
    ws.expect_entries([shown, f"ci{marked('200B')}.yml"])  # by the stored names: U+200B sorts before U+2039
    expect(ws.entry(shown).get_by_test_id("hidden-char")).to_have_text([marked("200B"), marked("E0041")])
    expect(ws.page.get_by_test_id("entry").nth(1).get_by_test_id("hidden-char")).to_have_count(0)
    expect(ws.page.get_by_test_id("delete-entry").first).to_have_attribute("aria-label", f"Delete {shown}")  # heard
    ws.entry(shown).click()
    expect(ws.page.get_by_test_id("file-name")).to_have_text(f"/{shown}")
    expect(ws.page.get_by_test_id("content")).to_have_text(f"deploy: true {marked('202E')}# off")
    expect(ws.page.get_by_test_id("content").get_by_test_id("hidden-char")).to_have_count(1)
    body = ws.page.locator("body").inner_text()
    assert not any(c in body for c in "\u202e\u200b\U000e0041")
    ws.page.get_by_test_id("edit").click()
    assert ws.page.get_by_test_id("editor").input_value() == content  # the real text, to edit

    answers: list[httpx.Response] = []
    target = "/.github/workflows/ci\u200b.yml"  # shown raw, it reads as the workflow everyone knows
    writing = threading.Thread(
        target=lambda: answers.append(ws.api.post(ws.fs(target), json={"content": "on: push\n"})), daemon=True
    )
    writing.start()
    expect(ws.page.get_by_test_id("approval-dialog")).to_be_visible()
    expect(ws.page.get_by_test_id("approval-text")).to_contain_text(f"write /.github/workflows/ci{marked('200B')}.yml")
    ws.page.get_by_test_id("approval-deny").click()
    writing.join(30)
    assert answers[-1].status_code == 403


def test_separators_and_other_invisible_characters_are_shown(ws: Workspace) -> None:
    """A line or paragraph separator (U+2028, U+2029) breaks a name or a line where none is (``a<U+2028>b.txt`` showed
    as ``a`` over ``b.txt``, two names in one row), and a C1 control (U+0085 "next line") or a shorthand format
    control (U+1BCA0) shows nothing: each was shown raw. Boxed now, with the invisible operators, the byte order mark,
    a tag and the Hangul fillers that already were."""
    name = "a\u2028b.txt"
    content = "one\u2029two\u0085three\U0001bca0four \u2064\ufeff\U000e0001\u3164\uffa0.\n"
    ws.put_file(f"/{name}", content)
    ws.open()
    shown = f"a{marked('2028')}b.txt"
    expect(ws.entry(shown).get_by_test_id("hidden-char")).to_have_text([marked("2028")])
    expect(ws.page.get_by_test_id("delete-entry").first).to_have_attribute("aria-label", f"Delete {shown}")
    ws.entry(shown).click()
    expect(ws.page.get_by_test_id("file-name")).to_have_text(f"/{shown}")
    codes = ["2029", "0085", "1BCA0", "2064", "FEFF", "E0001", "3164", "FFA0"]
    expect(ws.page.get_by_test_id("content").get_by_test_id("hidden-char")).to_have_text([marked(c) for c in codes])
    body = ws.page.locator("body").inner_text()
    assert not any(c in body for c in "\u2028\u2029\u0085\U0001bca0")
    ws.page.get_by_test_id("edit").click()
    assert ws.page.get_by_test_id("editor").input_value() == content  # the real text, to edit


def test_joiners_that_change_what_shows_are_kept(ws: Workspace) -> None:
    """A zero-width joiner or non-joiner is marked where it shows nothing (between Latin letters, after an alef), but
    not where writing needs it and it changes the picture: an emoji sequence (a family), a Persian word (U+200C in
    everyday spelling), an Indic conjunct after a virama. Each of these was a box before."""
    kept = "family \U0001f468\u200d\U0001f469\u200d\U0001f467 \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 \u0915\u094d\u200d\u0937"
    ws.put_file("/joiners.txt", f"{kept}\nc\u200di \u0627\u200c\u0628\n")
    ws.open("/")
    ws.entry("joiners.txt").click()
    expect(ws.page.get_by_test_id("content")).to_contain_text(kept)
    expect(ws.page.get_by_test_id("content").get_by_test_id("hidden-char")).to_have_text(
        [marked("200D"), marked("200C")]
    )


def test_a_file_full_of_hidden_characters_shows_its_own_lines(ws: Workspace) -> None:
    """20,000 lines of four hidden characters each: the page once passed every piece of the text to one call, which
    takes fewer arguments (RangeError), and kept showing the file opened before under this one's name."""
    ws.put_file("/plain.txt", "nothing hidden\n")
    ws.put_file("/hidden.txt", "".join(f"line {i} a\u200bb\u202ec\u2066d\u200de\n" for i in range(20_000)))
    ws.open("/plain.txt")
    expect(ws.page.get_by_test_id("content")).to_have_text("nothing hidden")
    ws.open("/")
    ws.entry("hidden.txt").click()
    last = f"line 19999 a{marked('200B')}b{marked('202E')}c{marked('2066')}d{marked('200D')}e"
    # the name is shown with the file, once its 20,000 lines are rendered: wait as long as for them
    expect(ws.page.get_by_test_id("content")).to_contain_text(last, timeout=60_000)
    expect(ws.page.get_by_test_id("file-name")).to_have_text("/hidden.txt", timeout=60_000)
    expect(ws.page.get_by_test_id("content").get_by_test_id("hidden-char")).to_have_count(80_000)
    expect(ws.page.get_by_test_id("status")).to_be_hidden()


def test_back_and_forward_move_between_folders_and_files(ws: Workspace) -> None:
    ws.put_file("/src/app/main.py", "print(1)\n")
    ws.put_file("/README.md", "# Demo\n")
    ws.open()
    crumbs = ws.page.get_by_test_id("breadcrumbs")
    start = ws.page.evaluate("history.length")
    ws.entry("src/").click()
    expect(crumbs).to_have_text(f"{ws.session}/src")
    ws.entry("app/").click()
    expect(crumbs).to_have_text(f"{ws.session}/src/app")
    ws.entry("main.py").click()
    expect(ws.page.get_by_test_id("file-name")).to_have_text("/src/app/main.py")
    assert ws.page.evaluate("history.length") == start + 3  # one entry per folder or file opened
    ws.page.go_back()
    expect(ws.page.get_by_test_id("file-name")).to_be_hidden()
    expect(crumbs).to_have_text(f"{ws.session}/src/app")
    ws.page.go_back()
    expect(crumbs).to_have_text(f"{ws.session}/src")
    ws.expect_entries(["app/"])
    ws.page.go_forward()
    expect(crumbs).to_have_text(f"{ws.session}/src/app")
    ws.page.go_forward()
    expect(ws.page.get_by_test_id("file-name")).to_have_text("/src/app/main.py")
    ws.page.go_back()
    ws.page.go_back()
    ws.page.go_back()
    ws.expect_entries(["src/", "README.md"])
    expect(crumbs).to_have_text(ws.session)
    assert ws.page.evaluate("history.length") == start + 3  # rendering an entry never adds one
    assert ws.page.url.endswith(f"#{AGENT}/{ws.session}/")
    ws.page.go_forward()  # still in the app: the entries are all there
    expect(crumbs).to_have_text(f"{ws.session}/src")


def test_leaving_unsaved_edits_asks_first(ws: Workspace) -> None:
    ws.put_file("/notes.md", "saved\n")
    ws.put_file("/other.md", "other\n")
    ws.open()
    ws.entry("notes.md").click()  # a history entry: Back stays in the app
    ws.page.get_by_test_id("edit").click()
    editor = ws.page.get_by_test_id("editor")
    editor.fill("typed, not saved\n")
    ws.entry("other.md").click()  # declined: the edits stay
    expect(editor).to_have_value("typed, not saved\n")
    ws.page.evaluate("history.back()")  # Back, declined: still on the file, still editing
    for _ in range(600):  # the question comes with the popstate event (60 s: a budget only a hang reaches)
        if len(ws.dialogs) == 2:
            break
        ws.page.wait_for_timeout(100)
    expect(ws.page.get_by_test_id("file-name")).to_have_text("/notes.md")
    expect(editor).to_have_value("typed, not saved\n")
    assert ws.dialogs == ["Discard your unsaved changes to /notes.md?"] * 2
    ws.accept_dialogs = True
    ws.entry("other.md").click()
    expect(ws.page.get_by_test_id("file-name")).to_have_text("/other.md")
    assert len(ws.dialogs) == 3 and ws.content("/notes.md") == "saved\n"
    ws.page.get_by_test_id("edit").click()
    ws.page.get_by_test_id("cancel").click()  # Cancel discards without asking: that is what it means
    ws.entry("notes.md").click()
    expect(ws.page.get_by_test_id("file-name")).to_have_text("/notes.md")
    assert len(ws.dialogs) == 3
    ws.page.get_by_test_id("edit").click()
    editor.fill("typed again\n")
    ws.accept_dialogs = False
    ws.page.evaluate("location.reload()")  # leaving the page: the browser's own question, declined
    for _ in range(600):
        if len(ws.dialogs) == 4:
            break
        ws.page.wait_for_timeout(100)
    expect(editor).to_have_value("typed again\n")


def test_the_most_recently_changed_session_opens_with_counted_files(service: ServiceProcess, browser: object) -> None:
    agent = f"recent-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=service.url, headers=service.headers(), timeout=30) as api:
        ids = {}
        for session in ("older", "newer", "generated"):
            made = api.post(f"/v1/agents/{agent}/sessions", json={"id": session} if session != "generated" else {})
            assert made.status_code == 201
            ids[session] = made.json()["id"]
        generated = ids["generated"]  # a UUIDv7
        for path in ("/a.txt", "/b.txt"):
            assert (
                api.post(f"/v1/agents/{agent}/sessions/{generated}/fs{path}", json={"content": "x"}).status_code == 201
            )
        # written last: "older" is the session changed most recently
        assert api.post(f"/v1/agents/{agent}/sessions/older/fs/notes.md", json={"content": "x"}).status_code == 201
        listed = {s["id"]: s for s in api.get(f"/v1/agents/{agent}/sessions").json()["data"]}
        assert listed["older"]["file_count"] == 1 and listed[generated]["file_count"] == 2
        assert listed["older"]["changed_at"] > listed["newer"]["changed_at"]
    context = browser.new_context(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
    page = context.new_page()
    sign_in(page, service)
    page.goto(f"{service.url}/#{agent}")
    ready(page)
    assert page.get_by_test_id("session").input_value() == "older"
    options = page.locator("#session option").all_inner_texts()
    assert options[0] == "older · 1 file"  # most recently changed first
    assert "newer · 0 files" in options
    (label,) = [o for o in options if o.startswith("Started ")]  # a generated id is named by its start
    assert label.endswith(" · 2 files") and generated not in label
    page.select_option("#session", generated)
    root = page.get_by_test_id("breadcrumbs").locator("a.root")
    expect(root).to_have_text(label.removesuffix(" · 2 files"))
    assert root.get_attribute("title") == generated  # the id is still at hand
    context.close()


def _overflows(page: Page) -> list[str]:
    """What sticks out of the viewport sideways: the page itself, or a header control."""
    return page.evaluate(
        """() => {
          const out = [];
          if (document.documentElement.scrollWidth > innerWidth) out.push(`page ${document.documentElement.scrollWidth}`);
          for (const node of document.querySelectorAll("header button:not([hidden]), header select")) {
            const box = node.getBoundingClientRect();
            if (box.left < 0 || box.right > innerWidth || box.width === 0) out.push(node.id);
          }
          return out;
        }"""
    )


def _lines(page: Page, selector: str) -> list[int]:
    """How many lines each matching element's text takes (its line boxes' distinct tops)."""
    return page.evaluate(
        """(selector) => [...document.querySelectorAll(selector)].map((node) => {
          const range = document.createRange();
          range.selectNodeContents(node);
          return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
        })""",
        selector,
    )


@pytest.mark.parametrize("width", [1280, 820, 360])
def test_the_layout_fits_from_wide_to_narrow(service: ServiceProcess, browser: object, width: int) -> None:
    agent = f"layout-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=service.url, headers=service.headers(), timeout=30) as api:
        session = api.post(f"/v1/agents/{agent}/sessions", json={}).json()["id"]  # a UUIDv7
        names = [
            "a_generated_module_name_without_any_spaces_that_goes_on_and_on.py",
            "notes about the quarterly planning meeting with everyone.md",
            "README.md",
        ]
        for name in names:
            assert (
                api.post(f"/v1/agents/{agent}/sessions/{session}/fs/{quote(name)}", json={"content": "x\n"}).status_code
                == 201
            )
    context = browser.new_context(viewport={"width": width, "height": 800})  # type: ignore[attr-defined]
    page = context.new_page()
    page.set_default_timeout(15_000)
    sign_in(page, service)
    page.goto(f"{service.url}/#{agent}/{session}/README.md")
    ready(page)
    expect(page.get_by_test_id("file-name")).to_have_text("/README.md")
    expect(page.get_by_test_id("entry")).to_have_count(3)
    assert _overflows(page) == []
    for control in ("new-session", "delete-session", "sign-out", "session", "agent"):
        expect(page.get_by_test_id(control)).to_be_visible()
    # names stay on one line, ending in an ellipsis when too long: never broken mid-word
    assert _lines(page, "[data-testid=entry]") == [1, 1, 1]
    long_name = page.get_by_test_id("entry").filter(has_text="a_generated_module").first
    assert long_name.get_attribute("title") == names[0]
    # the breadcrumb's root names the session by when it started, not by its UUID
    root = page.get_by_test_id("breadcrumbs").locator("a.root")
    assert root.inner_text().startswith("Started ") and session not in root.inner_text()
    assert _lines(page, "#crumbs a.root") == [1]
    assert page.locator("#session option").all_inner_texts()[0].endswith(" · 3 files")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"browser-{width}.png"), full_page=True)
    assert (ARTIFACTS / f"browser-{width}.png").stat().st_size > 10_000
    context.close()


@pytest.mark.parametrize(("path", "rendered"), [("/docs", ".opblock"), ("/redoc", "[data-section-id]")])
def test_the_api_docs_work_without_the_internet(
    service: ServiceProcess, browser: object, path: str, rendered: str
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    outside: list[str] = []

    def loopback_only(route: playwright_api.Route) -> None:
        if route.request.url.startswith(service.url + "/"):
            route.continue_()
        else:  # a CDN, a font service, a validator: none may be needed
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", loopback_only)
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    answer = page.goto(service.url + path)
    assert answer is not None and answer.status == 200
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "cdn" not in policy  # no inline or remote script
    expect(page.locator(rendered).first).to_be_visible()
    assert page.locator(rendered).count() > 20  # the operations, not an error box
    expect(page.get_by_text("/v1/agents/{agent_id}/sessions", exact=False).first).to_be_attached()
    # Redoc's footer asks its CDN for a logo: the page's policy blocks that before any request (and Redoc then
    # hides the image); anything else logged is a fault
    blocked_logo = 'violates the following Content Security Policy directive: "img-src'
    assert outside == [] and [p for p in problems if blocked_logo not in p] == []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"docs{path.replace('/', '-')}.png"))
    context.close()


def test_changes_made_elsewhere_appear_without_a_reload(ws: Workspace) -> None:
    """An edit through the API reaches the open page over its event stream: the file and the listing."""
    ws.put_file("/live.txt", "one\n")
    ws.open("/live.txt")
    expect(ws.page.get_by_test_id("content")).to_have_text("one")
    marker = ws.page.evaluate("() => (window.__notReloaded = 'yes')")
    assert ws.api.put(ws.fs("/live.txt"), json={"content": "two\n"}).status_code == 200
    expect(ws.page.get_by_test_id("content")).to_have_text("two")
    ws.put_file("/arrived.txt", "new\n")
    ws.expect_entries(["arrived.txt", "live.txt"])
    assert ws.api.delete(ws.fs("/arrived.txt")).status_code == 204
    ws.expect_entries(["live.txt"])
    assert ws.page.evaluate("() => window.__notReloaded") == marker  # the same page all along


def test_the_history_panel_shows_who_changed_the_file_and_diffs_two_versions(ws: Workspace) -> None:
    ws.put_file("/story.md", "title\nold line\nend\n")
    ws.open("/story.md")
    ws.page.get_by_test_id("edit").click()
    ws.page.get_by_test_id("editor").fill("title\nnew line\nend\nappendix\n")
    ws.page.get_by_test_id("save").click()
    expect(ws.page.get_by_test_id("status")).to_contain_text("Saved /story.md")
    entries = ws.page.get_by_test_id("history-entry")
    expect(entries).to_have_count(2)
    expect(entries.first).to_contain_text("user via browser")  # newest first: the browser's save
    history = ws.api.get(f"/v1/agents/{AGENT}/sessions/{ws.session}/history").json()["data"]
    assert history[0]["actor"]["via"] == "browser" and history[1]["actor"]["via"] == "rest"
    picks = ws.page.get_by_test_id("history-pick")
    picks.nth(0).check()
    picks.nth(1).check()
    lines = ws.page.get_by_test_id("version-diff-line")
    expect(lines).to_have_text(["  title", "- old line", "+ new line", "  end", "+ appendix"])
    expect(ws.page.get_by_test_id("version-diff-title")).to_contain_text("/story.md")
    ws.page.screenshot(path=str(ARTIFACTS / "history-diff.png"), full_page=True)
    ws.page.get_by_test_id("history-undo").first.click()  # undo the browser's save
    expect(ws.page.get_by_test_id("content")).to_have_text("title\nold line\nend")  # live, from the undo
    expect(entries).to_have_count(3)
    assert ws.content("/story.md") == "title\nold line\nend\n"
