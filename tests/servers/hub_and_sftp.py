"""Session fixtures for the hf:// and sftp:// tests: the fake Hugging Face Hub and a real SFTP server, on loopback.

* `fake_hf_hub`: `tests/servers/fake_hf_hub.py` (stdlib HTTP server) accepting the token `HF_TEST_TOKEN`, with
  one dataset repository `HF_REPO` created through `huggingface_hub` itself. It pages tree listings at
  `HF_PAGE_SIZE` entries, so every listing of more files than that follows the `Link` header as on the Hub.
* `sftp_server`: `tests/servers/sftp_server.py` (asyncssh) serving a temp directory as `/`, for the user
  `SFTP_USER` with a fresh ed25519 key or `SFTP_PASSWORD`; its fresh host key is written as a known_hosts line.

asyncssh was chosen over OpenSSH's sshd: it installs from PyPI with the test extra (no apt step in the Makefile),
runs unprivileged, starts in well under a second, and is a complete SSH 2 / SFTP 3 implementation with the OpenSSH
extensions, so paramiko talks to it exactly as to sshd (key exchange, host key check, public-key and password
authentication, posix-rename).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.services import SERVERS, Service, _http_answers, free_port, start_service

HF_TEST_TOKEN = "hf_TestTokenThatIsSecret0123456789"
HF_REPO = "mds-org/storage-tests"
HF_PAGE_SIZE = 7
SFTP_USER = "tester"
SFTP_PASSWORD = "sftp-Password-Secret-42"


@pytest.fixture(scope="session")
def fake_hf_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The fake Hub, with the dataset repository `HF_REPO`; `extra`: token, repo.

    huggingface_hub reads its home, endpoint and telemetry settings once, at import, and then fetches an
    "agent harness" registry from its endpoint and looks for a login token under its home. For the session they
    point at an empty home and at the fake, so that no token, cache or request leaves the test's own files and
    loopback (and a token of the machine's own `hf auth login` is never sent).
    """
    workdir = tmp_path_factory.mktemp("fake_hf_hub")
    port = free_port()
    argv = [sys.executable, str(SERVERS / "fake_hf_hub.py"), str(port), HF_TEST_TOKEN, str(HF_PAGE_SIZE)]
    service = start_service(
        "fake-hf-hub", argv, port, workdir, lambda: _http_answers(f"http://127.0.0.1:{port}/api/agent-harnesses")
    )
    home = workdir / "hf_home"
    home.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        settings = {"HF_HOME": str(home), "HF_ENDPOINT": service.endpoint, "HF_HUB_DISABLE_TELEMETRY": "1"}
        for name, value in settings.items():
            patch.setenv(name, value)
        from huggingface_hub import HfApi, constants

        # Already imported by an earlier test (perhaps in offline mode, as the zoo's tokenizer tests run): apply the
        # same settings to what it read.
        for name, value in (
            ("HF_HUB_DISABLE_TELEMETRY", True),
            ("ENDPOINT", service.endpoint),
            ("HF_HUB_OFFLINE", False),
        ):
            patch.setattr(constants, name, value)
        # huggingface_hub builds its file-URL template from the endpoint once, at import.
        patch.setattr(
            constants, "HUGGINGFACE_CO_URL_TEMPLATE", service.endpoint + "/{repo_id}/resolve/{revision}/{filename}"
        )
        for name in ("HF_TOKEN_PATH", "HF_STORED_TOKENS_PATH", "AGENT_HARNESSES_PATH"):
            if hasattr(constants, name):  # (not all of them exist in every huggingface_hub version)
                patch.setattr(constants, name, str(home / os.path.basename(getattr(constants, name))))
        HfApi(endpoint=service.endpoint, token=HF_TEST_TOKEN).create_repo(HF_REPO, repo_type="dataset")
        service.extra.update(token=HF_TEST_TOKEN, repo=HF_REPO)
        yield service
    service.stop()


def _ssh_banner(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as probe:
            return probe.recv(4) == b"SSH-"
    except OSError:
        return False


def _new_key(path: Path) -> str:
    """Write a fresh ed25519 private key (OpenSSH format) to `path`, its public key to `path.pub`; return the latter."""
    import asyncssh

    key = asyncssh.generate_private_key("ssh-ed25519")
    key.write_private_key(str(path))
    path.chmod(0o600)
    public = key.export_public_key().decode().strip()
    (path.parent / f"{path.name}.pub").write_text(public + "\n")
    return public


@pytest.fixture(scope="session")
def sftp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The SFTP server; `extra`: user, password, key_file (authorized), other_key_file (not), host_key, root."""
    workdir = tmp_path_factory.mktemp("sftp_server")
    root = workdir / "root"
    root.mkdir()
    host_public = _new_key(workdir / "host_key")
    (workdir / "authorized_keys").write_text(_new_key(workdir / "client_key") + "\n")
    _new_key(workdir / "other_key")
    port = free_port()
    argv = [
        sys.executable,
        str(SERVERS / "sftp_server.py"),
        str(port),
        str(root),
        str(workdir / "host_key"),
        str(workdir / "authorized_keys"),
        SFTP_USER,
        SFTP_PASSWORD,
    ]
    service = start_service("sftp-server", argv, port, workdir, lambda: _ssh_banner(port))
    service.extra.update(
        user=SFTP_USER,
        password=SFTP_PASSWORD,
        key_file=workdir / "client_key",
        other_key_file=workdir / "other_key",
        host_key=" ".join(host_public.split()[:2]),
        root=root,
    )
    yield service
    service.stop()


def known_hosts_line(service: Service, port: int | None = None) -> str:
    """The known_hosts entry that makes paramiko trust `service` on `port` (default: its own)."""
    return f"[127.0.0.1]:{port or service.port} {service.extra['host_key']}\n"
