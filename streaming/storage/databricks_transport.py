"""The databricks-sdk's workspace requests, sent through this machine's budget for the workspace.

The SDK has no transport hook, so `route_through_budget` mounts an HTTP adapter on its requests session for the
workspace's origin (databricks-sdk 0.38 to the newest keep that session at `api_client._api_client._session`, the
runtimes' older ones at `api_client._session`; CI runs 0.20, 0.30, 0.38 and the newest), and on the sessions the
newest SDKs' files client keeps for its own Files API requests. The adapter holds a lease
of `streaming.storage.workspace_budget` from sending a request until its answer has been read, and turns a
throttled answer's `Retry-After` into a pause for the whole machine; the SDK then retries the request itself, as
always. Requests to other origins (presigned cloud storage URLs) are not touched.
"""

from __future__ import annotations

import email.utils
import logging
import time
import weakref
from typing import Any

import requests
import requests.adapters

from streaming.storage import workspace_budget

logger = logging.getLogger(__name__)


def route_through_budget(client: Any) -> None:
    """Mount the budgeted adapter on `client`'s (a `WorkspaceClient`) session for its workspace."""
    api_client = client.api_client
    session = getattr(getattr(api_client, "_api_client", api_client), "_session", None)
    if not isinstance(session, requests.Session):
        from databricks.sdk.version import __version__

        logger.warning(
            "databricks-sdk %s keeps no requests session where expected: its workspace requests are not budgeted "
            "(its own 429 retries still apply)",
            __version__,
        )
        return
    host = client.config.host.rstrip("/")
    adapter = BudgetedAdapter(workspace_budget.budget_for(host))
    session.mount(host + "/", adapter)
    for extra in _files_sessions(client):
        extra.mount(host + "/", adapter)


def _files_sessions(client: Any) -> list[requests.Session]:
    """The Files API's own sessions to the workspace, made now so that they can be budgeted too.

    Newer databricks-sdks (0.6x on) send some Files API requests (endpoint discovery, direct downloads) through
    sessions of their files client, made on first use: asking for them here makes them, with the SDK's own settings.
    Presigned cloud storage URLs keep their own session (another origin, outside the workspace's limits).
    """
    files = getattr(client, "files", None)
    sessions = []
    for name in ("_authenticated_session", "_discovery_session"):
        make = getattr(files, name, None)
        if callable(make):
            try:
                made = make()
            except Exception:  # noqa: BLE001 - an SDK whose method needs more: its requests stay unbudgeted
                continue
            if isinstance(made, requests.Session):
                sessions.append(made)
    return sessions


class BudgetedAdapter(requests.adapters.HTTPAdapter):
    """An HTTP adapter that holds a budget lease from sending a request to reading its answer."""

    def __init__(self, budget: workspace_budget.WorkspaceBudget) -> None:
        super().__init__(pool_connections=20, pool_maxsize=20, pool_block=True)  # the SDK's own pool settings
        self.budget = budget

    def send(self, request: Any, stream: bool = False, **kwargs: Any) -> Any:  # type: ignore[override]
        lease = self.budget.lease()
        try:
            response = super().send(request, stream=stream, **kwargs)
            if response.status_code in (429, 503):
                pause = retry_after(response.headers.get("Retry-After"), response.status_code)
                if pause > 0:
                    self.budget.pause(pause)
            if not stream or request.method == "HEAD" or response.headers.get("Content-Length") == "0":
                response.content  # noqa: B018 - the request is in flight until its answer is read
                lease.release()
            else:
                _release_when_read(response, lease)
        except BaseException:
            lease.release()
            raise
        return response


def _release_when_read(response: Any, lease: workspace_budget.Lease) -> None:
    """Release a streamed answer's lease once its body is read to the end or closed (at the latest, collected).

    urllib3 hands the connection back through `release_conn` at the end of the body and on `close`.
    """
    raw = response.raw
    original = getattr(raw, "release_conn", None)
    if original is not None:

        def release_conn() -> None:
            lease.release()
            original()

        raw.release_conn = release_conn
    weakref.finalize(response, lease.release)


def retry_after(header: str | None, status: int) -> float:
    """Seconds a throttled answer asks to wait: its `Retry-After` (seconds or an HTTP date); 1 for a 429 without."""
    text = (header or "").strip()
    if text.isdigit():
        return float(text)
    if text:
        try:
            return max(0.0, email.utils.parsedate_to_datetime(text).timestamp() - time.time())
        except (TypeError, ValueError):
            pass
    return 1.0 if status == 429 else 0.0
