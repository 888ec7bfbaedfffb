"""Round four (issue 47), attacks 3 and 4: every credential shape, anywhere in an error's chain.

The failing calls are real: google-auth reading ``GOOGLE_APPLICATION_CREDENTIALS`` that holds the JSON itself (it
quotes the whole file), google-auth refreshing a service account's token against a loopback token endpoint that
answers with tokens and echoes the signed assertion, azure-identity's client-secret flow against a loopback TLS
authority that echoes the form body, botocore's ``credential_process`` failing with the credentials on its
stderr, and databricks-sdk against a loopback workspace whose 401 body quotes the token. What the package raises
(the error, every exception of its chain, the traceback Python prints), what the command line prints (also with
``--debug``) and what the package logs may hold none of them. On the code before issue 47 the private key, the
tokens, the client secret, the AWS secret key and the Databricks token all survived somewhere.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import logging
import os
import ssl
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from streaming.cli import main
from streaming.cli.console import error_line
from streaming.storage.errors import CredentialsError, scrubbed_cause
from streaming.storage.registry import storage_for
from streaming.storage.secrets import scrub

PRIVATE_KEY_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKjMzEfYyjiWA4R4"
FAKE_PEM = f"-----BEGIN PRIVATE KEY-----\n{PRIVATE_KEY_BODY}\n-----END PRIVATE KEY-----\n"
REFRESH_TOKEN = "1//0gREFRESHxTOKENxSECRETxVALUE"
ID_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMTIyMzM0NDU1In0.c2lnbmF0dXJlU0VDUkVU"
ACCESS_TOKEN = "ya29.a0ACCESSxTOKENxSECRET"
CLIENT_SECRET = "GOCSPX-CLIENTxSECRETxVALUE"
DATABRICKS_TOKEN = "dapi0123456789abcdef0123456789abcdef-3"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRETKEY"
AWS_SESSION = "FQoGZXIvYXdzEXAMPLESESSIONxTOKEN"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
SAS_SIGNATURE = "sWSIGNATUREx2Bz8%2BAbCdEf%3D"


def _everything_printed(error: BaseException) -> str:
    """The traceback Python prints of ``error`` and the text and repr of every exception of its chain."""
    texts, pending, seen = [], [error], []
    while pending:
        link = pending.pop()
        if link is None or any(link is other for other in seen):
            continue
        seen.append(link)
        texts += [str(link), repr(link), *getattr(link, "__notes__", ())]
        pending += [link.__cause__, link.__context__]
    return "".join(traceback.format_exception(error)) + "\n".join(texts)


# ------------------------------------------------------------------------------------------ the scrubber


@pytest.mark.parametrize(
    "text, secrets, kept",
    [
        (  # an OAuth token endpoint's answer
            json.dumps({"access_token": ACCESS_TOKEN, "refresh_token": REFRESH_TOKEN, "id_token": ID_TOKEN}),
            [ACCESS_TOKEN, REFRESH_TOKEN, ID_TOKEN],
            ['"refresh_token": "***"', '"id_token"'],
        ),
        (  # a form body sent to it
            f"grant_type=refresh_token&refresh_token={REFRESH_TOKEN}&client_secret={CLIENT_SECRET}&client_id=x",
            [REFRESH_TOKEN, CLIENT_SECRET],
            ["grant_type=refresh_token", "client_id=x"],
        ),
        (  # an Azure connection string, with a SAS
            f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={ACCOUNT_KEY};EndpointSuffix=core.windows"
            f".net;SharedAccessSignature=sv=2022-11-02&ss=b&sig={SAS_SIGNATURE}",
            [ACCOUNT_KEY, SAS_SIGNATURE],
            ["AccountName=acct", "AccountKey=***"],
        ),
        (  # a bare Databricks token in a 401 body
            json.dumps({"error_code": "UNAUTHENTICATED", "message": f"Invalid access token {DATABRICKS_TOKEN}"}),
            [DATABRICKS_TOKEN, DATABRICKS_TOKEN[:36]],
            ["UNAUTHENTICATED", "Invalid access token"],
        ),
        (  # an AWS credentials file and environment
            f"[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = {AWS_SECRET}\n"
            f"aws_session_token={AWS_SESSION}\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}",
            [AWS_SECRET, AWS_SESSION],
            ["aws_access_key_id = AKIAEXAMPLE"],
        ),
        (  # a credential process's JSON, camel case
            json.dumps(
                {"Version": 1, "AccessKeyId": "AKIAEXAMPLE", "SecretAccessKey": AWS_SECRET, "SessionToken": AWS_SESSION}
            ),
            [AWS_SECRET, AWS_SESSION],
            ['"AccessKeyId": "AKIAEXAMPLE"'],
        ),
        (  # a whole service account file, and the same quoted inside another string
            json.dumps(
                {
                    "type": "service_account",
                    "private_key_id": "0123abcd",
                    "private_key": FAKE_PEM,
                    "client_email": "a@p.iam",
                }
            ),
            [PRIVATE_KEY_BODY, "0123abcd"],
            ['"client_email": "a@p.iam"', '"private_key": "***"'],
        ),
        (
            repr(json.dumps({"private_key": FAKE_PEM, "client_secret": CLIENT_SECRET, "refresh_token": REFRESH_TOKEN})),
            [PRIVATE_KEY_BODY, CLIENT_SECRET, REFRESH_TOKEN],
            ["private_key"],
        ),
        (  # a printed dict (what google-auth's RefreshError shows)
            str({"error": "invalid_grant", "refresh_token": REFRESH_TOKEN, "clientSecret": CLIENT_SECRET}),
            [REFRESH_TOKEN, CLIENT_SECRET],
            ["'error': 'invalid_grant'"],
        ),
        (  # a PEM block alone, also one cut short by a message's length limit
            f"could not parse {FAKE_PEM} and {FAKE_PEM[:60]}",
            [PRIVATE_KEY_BODY, PRIVATE_KEY_BODY[:20]],
            ["-----BEGIN PRIVATE KEY-----"],
        ),
        (  # headers and connection-string passwords
            f"Authorization: Bearer {ACCESS_TOKEN}\nX-Databricks-Azure-SP-Management-Token: {ACCESS_TOKEN}x\n"
            f"Server=db;User Id=u;Password=hunter2secret;",
            [ACCESS_TOKEN, "hunter2secret"],
            ["User Id=u"],
        ),
    ],
)
def test_the_scrubber_removes_every_shape(text, secrets, kept):
    cleaned = scrub(text)
    assert not [secret for secret in secrets if secret in cleaned], cleaned
    assert all(part in cleaned for part in kept), cleaned
    assert scrub(cleaned) == cleaned


def test_what_is_not_a_secret_is_left_alone():
    text = (
        "NoSuchKey: <Key>ds/shard.00000.mds</Key> token_type=Bearer; tokens 12; the key s3://b/k; x-amz-request-id: 1"
    )
    assert scrub(text) == text


def test_a_secret_anywhere_in_a_chain_is_replaced_by_a_scrubbed_copy():
    try:
        try:
            try:
                raise KeyError(f"refresh_token={REFRESH_TOKEN}")
            except KeyError as inner:
                raise RuntimeError("while reading the credential file") from inner
        except RuntimeError as middle:
            middle.add_note(f"client_secret: {CLIENT_SECRET}")
            raise ValueError("clean text") from middle
    except ValueError as err:
        outer = err
    copy = scrubbed_cause(outer)
    printed = _everything_printed(copy)
    assert REFRESH_TOKEN not in printed and CLIENT_SECRET not in printed
    assert "builtins.ValueError: clean text" in printed and "builtins.KeyError" in printed  # type names kept
    clean = RuntimeError("nothing secret")
    assert scrubbed_cause(clean) is clean


# ------------------------------------------------------------------------------------------ loopback servers


@contextmanager
def _loopback(answer: Callable[[str, str, str], tuple[int, dict]], tls_folder: str | None = None) -> Iterator[str]:
    """A server on 127.0.0.1 that answers every request with ``answer(method, path, body)`` as JSON; yields its
    base URL (``https`` with a fresh self-signed certificate in ``tls_folder``, trusted through
    ``REQUESTS_CA_BUNDLE`` by the caller)."""

    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            status, document = answer(self.command, self.path, body)
            data = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_HEAD = _reply

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    scheme = "http"
    if tls_folder is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*_self_signed(tls_folder))
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{scheme}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _self_signed(folder: str) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, written in ``folder``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    with open(cert_path, "wb") as sink:
        sink.write(certificate.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as sink:
        sink.write(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return cert_path, key_path


def _rsa_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _assert_clean(error: BaseException, secrets: list[str], caplog: pytest.LogCaptureFixture) -> None:
    printed = _everything_printed(error) + error_line("cp", f"{type(error).__name__}: {error}")
    logged = "\n".join(record.getMessage() for record in caplog.records if record.name.startswith("streaming"))
    leaked = [secret for secret in secrets if secret in printed or secret in logged]
    assert not leaked, printed


# ------------------------------------------------------------------------------------------ real failing calls


def test_google_credentials_json_in_the_variable_leaves_no_key_in_the_chain(
    credential_free_environment, monkeypatch, caplog
):
    caplog.set_level(logging.INFO)
    document = {
        "type": "service_account",
        "project_id": "p",
        "private_key_id": "4f1e2d3c4b5a69788796a5b4c3d2e1f0",
        "private_key": FAKE_PEM,
        "client_email": "job@p.iam.gserviceaccount.com",
    }
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", json.dumps(document))
    with pytest.raises(CredentialsError) as info:
        storage_for("gs://round4-json-env/ds/index.json").size("gs://round4-json-env/ds/index.json")
    assert "client_email" in _everything_printed(info.value)  # google-auth's own text is kept, scrubbed
    _assert_clean(info.value, [PRIVATE_KEY_BODY, document["private_key_id"]], caplog)


def test_the_debug_traceback_of_the_command_line_holds_no_key(credential_free_environment, monkeypatch, capsys):
    document = {"type": "service_account", "private_key": FAKE_PEM, "client_email": "job@p.iam.gserviceaccount.com"}
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", json.dumps(document))
    assert main(["inspect", "gs://round4-debug/ds", "--debug"]) == 1
    printed = capsys.readouterr()
    assert "Traceback" in printed.err and "CredentialsError" in printed.err
    assert PRIVATE_KEY_BODY not in printed.err + printed.out


def test_a_token_endpoint_answering_with_tokens_leaves_none_in_the_chain(
    credential_free_environment, monkeypatch, tmp_path, caplog
):
    caplog.set_level(logging.INFO)
    sent: list[str] = []

    def token_endpoint(method: str, path: str, body: str) -> tuple[int, dict]:
        sent.append(body)
        return 400, {
            "error": "invalid_grant",
            "error_description": f"refused {body}",
            "refresh_token": REFRESH_TOKEN,
            "id_token": ID_TOKEN,
            "access_token": ACCESS_TOKEN,
        }

    pem = _rsa_pem()
    with _loopback(token_endpoint) as base:
        document = {
            "type": "service_account",
            "project_id": "p",
            "private_key_id": "k1",
            "private_key": pem,
            "client_email": "job@p.iam.gserviceaccount.com",
            "token_uri": f"{base}/token",
        }
        path = tmp_path / "service-account.json"
        path.write_text(json.dumps(document))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
        with pytest.raises(CredentialsError) as info:
            storage_for("gs://round4-refresh/ds/index.json").size("gs://round4-refresh/ds/index.json")
    assertion = sent[0].split("assertion=")[1].split("&")[0]
    assert "RefreshError" in _everything_printed(info.value)
    body = pem.splitlines()[1]
    _assert_clean(info.value, [REFRESH_TOKEN, ID_TOKEN, ACCESS_TOKEN, assertion, assertion[:60], body], caplog)


def test_an_aad_authority_echoing_the_client_secret_leaves_it_nowhere(tmp_path, monkeypatch, caplog):
    from azure.core.exceptions import ClientAuthenticationError
    from azure.identity import ClientSecretCredential

    caplog.set_level(logging.INFO)

    def authority(method: str, path: str, body: str) -> tuple[int, dict]:
        base = f"https://127.0.0.1:{port}/tenant"
        if method == "GET":  # the OpenID configuration msal reads first
            return 200, {
                "token_endpoint": f"{base}/oauth2/v2.0/token",
                "issuer": f"{base}/v2.0",
                "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
            }
        return 401, {
            "error": "invalid_client",
            "error_description": f"AADSTS7000215: Invalid client secret. Request: {body}",
        }

    with _loopback(authority, str(tmp_path)) as base:
        port = base.rsplit(":", 1)[1]
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "cert.pem"))
        credential = ClientSecretCredential(
            "tenant", "client-id", CLIENT_SECRET, authority=base, disable_instance_discovery=True
        )
        with pytest.raises(ClientAuthenticationError) as info:
            credential.get_token("https://storage.azure.com/.default")
    assert CLIENT_SECRET in str(info.value)  # what azure-identity itself says
    error = CredentialsError("azure://acct/container/ds", f"account 'acct' rejected the credentials: {info.value}")
    error.__cause__ = scrubbed_cause(info.value)
    _assert_clean(error, [CLIENT_SECRET], caplog)


def test_a_failing_credential_process_leaves_no_aws_secret_in_the_chain(
    credential_free_environment, monkeypatch, tmp_path, caplog
):
    caplog.set_level(logging.INFO)
    printed = json.dumps(
        {"Version": 1, "AccessKeyId": "AKIAEXAMPLE", "SecretAccessKey": AWS_SECRET, "SessionToken": AWS_SESSION}
    )
    script = tmp_path / "credentials.py"
    script.write_text(f"import sys\nsys.stderr.write({printed!r})\nsys.exit(1)\n")
    config = tmp_path / "aws-config"
    config.write_text(f"[default]\ncredential_process = {sys.executable} {script}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    with _loopback(lambda method, path, body: (500, {})) as base:
        monkeypatch.setenv("S3_ENDPOINT_URL", base)
        with pytest.raises(CredentialsError) as info:
            storage_for("s3://round4-process/ds/index.json").size("s3://round4-process/ds/index.json")
    assert "CredentialRetrievalError" in _everything_printed(info.value)
    _assert_clean(info.value, [AWS_SECRET, AWS_SESSION], caplog)


def test_a_workspace_quoting_the_token_in_its_401_leaves_it_nowhere(credential_free_environment, monkeypatch, caplog):
    from databricks.sdk import WorkspaceClient
    from databricks.sdk.errors import DatabricksError

    def workspace(method: str, path: str, body: str) -> tuple[int, dict]:
        if path.startswith("/.well-known"):
            return 404, {}
        return 401, {"error_code": "UNAUTHENTICATED", "message": f"Invalid access token {DATABRICKS_TOKEN}"}

    with _loopback(workspace) as base:
        monkeypatch.setenv("DATABRICKS_HOST", base)
        monkeypatch.setenv("DATABRICKS_TOKEN", DATABRICKS_TOKEN)
        with pytest.raises(DatabricksError) as raw:
            list(WorkspaceClient().files.list_directory_contents("/Volumes/main/default/vol/ds"))
        assert DATABRICKS_TOKEN in str(raw.value)  # what databricks-sdk itself says
        caplog.set_level(logging.INFO)
        with pytest.raises(CredentialsError) as info:
            storage_for("dbfs:/Volumes/main/default/vol/ds").list("dbfs:/Volumes/main/default/vol/ds")
    _assert_clean(info.value, [DATABRICKS_TOKEN, DATABRICKS_TOKEN[:36]], caplog)


@pytest.mark.parametrize(
    "crafted",
    [
        "a-" * 200_000,
        "ab" * 400_000 + "=",
        "eyJaaaaaaaaa." * 50_000,
        '"a":"' + "\\" * 100_000,
        '\\"password\\": \\"' * 20_000,
    ],
)
def test_the_scrubber_takes_linear_time_on_crafted_text(crafted):
    """An error body is the server's to choose: no text makes the scrubber backtrack quadratically (before, a
    run of 400,000 characters of URL-scheme letters took tens of seconds)."""
    import time

    started = time.process_time()
    scrub(crafted)
    assert time.process_time() - started < 5
