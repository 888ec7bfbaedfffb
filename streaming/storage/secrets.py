"""Secrets removed from any text before it is raised, logged or printed: the one scrubber of the package.

What a URL or an HTTP header can carry, in every form a client library quotes it: the password of a URL's user
info (``scheme://user:password@host``); the signing parameters of presigned URLs (S3's ``X-Amz-Signature``,
``X-Amz-Credential`` and ``X-Amz-Security-Token`` (an STS session token), GCS's ``X-Goog-Signature`` and
``X-Goog-Credential``, the older ``Signature``/``AWSAccessKeyId``/``GoogleAccessId``, Azure SAS's ``sig``),
also where they appear as headers; and the value of an ``Authorization`` header (``Bearer``, ``Basic`` or any
other scheme) or of a token header or field (``x-amz-security-token``, ``x-databricks-...-token``,
``access_token``). Each value becomes ``***``; the names stay, so a message still says what was sent.
"""

from __future__ import annotations

import re

#: The password of a URL's user info anywhere in a text: ``scheme://user:password@``.
_USERINFO_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*):[^\s/@]*@")
#: Names of query parameters and headers whose value is a credential (case-insensitive).
_SECRET_NAMES = (
    r"x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|x-goog-credential|signature|sig"
    r"|awsaccesskeyid|googleaccessid|access_token|token|[a-z0-9-]*-token|client_secret|password"
)
#: ``name=value`` in a query string or form (up to the next separator or quote).
_QUERY_SECRET = re.compile(rf"(?i)([?&;\s\"']|^)({_SECRET_NAMES})=[^&\s\"'<>]*")
#: ``name: value`` or ``'name': 'value'`` as a header line or a printed header dict.
_HEADER_SECRET = re.compile(
    rf"(?i)([\"']?\b(?:{_SECRET_NAMES}|authorization|proxy-authorization)[\"']?\s*:\s*)"
    r"([\"']?)(?:(?:bearer|basic|token|sharedkey)\s+)?[^\s\"',}&]+"
)
#: A bare ``Bearer <token>`` wherever it is quoted.
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}")


def scrub(text: str) -> str:
    """``text`` with every credential it quotes (see the module's docstring) replaced by ``***``."""
    text = _USERINFO_PASSWORD.sub(r"\1:***@", text)
    text = _QUERY_SECRET.sub(r"\1\2=***", text)
    text = _HEADER_SECRET.sub(r"\1\2***", text)
    return _BEARER.sub(r"\1 ***", text)
