"""A real headless Chromium (Debian's package) driven over the DevTools protocol on a pipe: no driver, no package.

`Browser.open(url)` loads a page and returns what a reader would meet there: the page's title and text, every link's
resolved address, and every console error, uncaught exception and failed load the page caused. The protocol runs on
the file descriptors Chromium reads and writes with ``--remote-debugging-pipe`` (3 and 4): JSON messages, each ended
by a NUL byte.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

#: The flags the brief of this test asks for: nothing reaches out, nothing is kept between runs.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)
INSTALL = "make chromium (apt-get install chromium)"


@dataclass
class Page:
    url: str
    title: str = ""
    text: str = ""
    links: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    load_error: str = ""


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise RuntimeError(f"The site's browser test needs Chromium, which is not installed: {INSTALL}.")
    return found


class Browser:
    """One Chromium process with one tab; close it with `close` (or use it as a context manager)."""

    def __init__(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="mds-chromium-")
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()

        def onto_3_and_4() -> None:
            # Chromium reads commands on descriptor 3 and answers on 4. Copies first: either end may be 3 or 4.
            reading, writing = os.dup(to_browser_read), os.dup(from_browser_write)
            os.dup2(reading, 3)
            os.dup2(writing, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        # close_fds=False: the pipe's copies on 3 and 4 are made in the child, after its descriptors were closed.
        self.process = subprocess.Popen(
            [chromium_path(), *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,
            preexec_fn=onto_3_and_4,
            start_new_session=True,  # its helpers (zygote, crashpad) are killed with it, by group
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=self.session)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        os.close(self._to_browser)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        os.close(self._from_browser)
        # A helper that was still writing into the profile can put a file back after the first pass (an empty
        # profile folder was once left in /tmp), so try again until the folder is gone.
        deadline = time.monotonic() + 10
        shutil.rmtree(self.profile, ignore_errors=True)
        while os.path.exists(self.profile) and time.monotonic() < deadline:
            time.sleep(0.05)
            shutil.rmtree(self.profile, ignore_errors=True)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError(f"Chromium exited (code {self.process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: str | None = None, timeout: float = 60, **params: Any) -> dict[str, Any]:
        """Send one command and return its result; events that arrive meanwhile are kept for `_drain`."""
        self._next_id += 1
        command: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            command["sessionId"] = session
        os.write(self._to_browser, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._events.append(message)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=self.session, expression=expression, returnByValue=True)
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 10) -> Any:
        """Poll ``expression`` in the page until it is truthy; its last value."""
        deadline = time.monotonic() + timeout
        value = self.evaluate(expression)
        while not value and time.monotonic() < deadline:
            time.sleep(0.1)
            value = self.evaluate(expression)
        return value

    def _wait_event(self, method: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(event.get("method") == method for event in self._events):
            self._events.append(self._read_message(deadline))

    def open(self, url: str, settle: float = 0.5) -> Page:
        """Load ``url``, wait for its load event and ``settle`` seconds more, and report what it showed."""
        self._events.clear()
        page = Page(url)
        navigation = self.call("Page.navigate", session=self.session, url=url)
        if navigation.get("errorText"):
            page.load_error = navigation["errorText"]
            return page
        self._wait_event("Page.loadEventFired", timeout=30)
        time.sleep(settle)
        self.evaluate("0")  # collects the events of the settle time
        page.title = self.evaluate("document.title")
        page.text = self.evaluate("document.body ? document.body.innerText : ''")
        page.links = self.evaluate("Array.from(document.querySelectorAll('a[href]'), a => a.href)")
        page.errors = self.errors()
        return page

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads reported since the last `open`."""
        found = []
        for event in self._events:
            params = event.get("params", {})
            if event.get("method") == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                found.append(f"exception: {details.get('exception', {}).get('description') or details.get('text')}")
            elif event.get("method") == "Runtime.consoleAPICalled" and params.get("type") == "error":
                found.append("console.error: " + " ".join(str(arg.get("value", arg)) for arg in params["args"]))
            elif event.get("method") == "Log.entryAdded" and params["entry"]["level"] == "error":
                entry = params["entry"]
                found.append(f"{entry['source']}: {entry['text']} {entry.get('url', '')}".strip())
        return found
