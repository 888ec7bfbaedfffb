"""Issue 34, attack 8: one scrubber for every secret a URL or a header can carry, on every error and log path.

The failing requests are real: presigned URLs signed by boto3 (with an STS session token) fetched with
``requests`` (what databricks-sdk fetches volume files through) from SeaweedFS, whose refusal ``requests``
quotes with the whole URL; their text then goes through our storage errors, their cause chains, the retry log
and the command line's error line. On the code before issue 34 the signature and the token passed all four.
"""

from __future__ import annotations

import logging

import pytest
import requests

from streaming.cli.console import error_line
from streaming.storage.errors import StorageError, scrubbed_cause
from streaming.storage.retry import call_with_retry
from streaming.storage.secrets import scrub
from tests.security.test_secrets import _everything_printed

SESSION_TOKEN = "IQoJb3JpZ2luX2VjEXAMPLESESSIONTOKEN"


def _refused_presigned_request(seaweedfs) -> tuple[str, requests.HTTPError]:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=seaweedfs.endpoint,
        aws_access_key_id=seaweedfs.extra["key"],
        aws_secret_access_key=seaweedfs.extra["secret"],
        aws_session_token=SESSION_TOKEN,
        region_name="us-east-1",
        config=Config(signature_version="s3v4"),
    )
    url = client.generate_presigned_url("get_object", Params={"Bucket": "absent", "Key": "f.mds"}, ExpiresIn=60)
    with pytest.raises(requests.HTTPError) as info:
        requests.get(url, timeout=10).raise_for_status()
    return url, info.value


def _secrets_of(url: str) -> list[str]:
    query = dict(part.split("=", 1) for part in url.partition("?")[2].split("&"))
    return [query["X-Amz-Signature"], query["X-Amz-Credential"], SESSION_TOKEN]


def test_a_refused_presigned_download_leaves_no_signature_or_token_anywhere(seaweedfs, caplog):
    url, refused = _refused_presigned_request(seaweedfs)
    secrets = _secrets_of(url)
    assert all(secret in str(refused) for secret in secrets[:1])  # what requests itself says
    error = StorageError(url, str(refused))
    error.__cause__ = scrubbed_cause(refused)
    printed = _everything_printed(error) + error_line("cp", f"{type(error).__name__}: {error}")
    caplog.set_level(logging.INFO, logger="streaming")
    attempts = iter([refused, None])

    def flaky() -> None:
        failure = next(attempts)
        if failure is not None:
            raise failure

    call_with_retry(flaky, 2, initial_backoff=0, max_jitter=0)
    logged = "".join(record.getMessage() for record in caplog.records)
    assert "X-Amz-Signature=***" in printed and "X-Amz-Signature=***" in logged
    for secret in secrets:
        assert secret not in printed and secret not in logged


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("https://acct.blob.core.windows.net/c/b?sv=2021-08-06&sr=b&sp=r&sig=AbC%2Bd%3D&se=2030", "AbC%2Bd%3D"),
        ("https://storage.googleapis.com/b/o?X-Goog-Credential=sa%40p&X-Goog-Signature=9f8e7d6c", "9f8e7d6c"),
        ("https://storage.googleapis.com/b/o?GoogleAccessId=sa@p&Expires=1&Signature=c2lnbmF0dXJl", "c2lnbmF0dXJl"),
        ("{'Authorization': 'Bearer dapi0123456789abcdef', 'User-Agent': 'x'}", "dapi0123456789abcdef"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", "eyJhbGciOiJIUzI1NiJ9"),
        ("headers {'x-amz-security-token': 'FQoGZXIvYXdzEXAMPLE'}", "FQoGZXIvYXdzEXAMPLE"),
        ("sent Bearer dapi0123456789abcdef to the host", "dapi0123456789abcdef"),
        ("cannot reach http://KEY:SECRET@host:9/x", "SECRET"),
    ],
)
def test_every_form_of_secret_is_scrubbed(text, secret):
    cleaned = scrub(text)
    assert secret not in cleaned and "***" in cleaned
    assert scrub(cleaned) == cleaned
