"""Secrets removed from any text before it is raised, logged or printed: the one scrubber of the package.

What a URL, an HTTP exchange, a configuration or a credential file can carry, in every form a client library
quotes it:

* the password of a URL's user info (``scheme://user:password@host``);
* a field named as a credential, whatever its spelling (``refresh_token``, ``refreshToken``, ``Refresh-Token``)
  and quoting: ``name=value`` in a query string, a form body, a connection string or an environment-like line
  (up to ``&``, ``;``, a quote or white space), ``"name": "value"`` in JSON or a printed dict (also escaped inside
  another string), and ``name: value`` as a header line. The names: tokens of every kind (access, refresh, id,
  session, security, SAS, auth; ``token`` itself and any ``*-token`` header), client secrets, secret (access)
  keys, account keys, private keys and their ids, API keys, passwords, OAuth assertions (a signed JWT a token is
  exchanged for), shared access signatures (``sig``,
  ``SharedAccessSignature``) and the presigned URLs' signing parameters (S3's ``X-Amz-Signature``,
  ``X-Amz-Credential``, ``X-Amz-Security-Token``, GCS's ``X-Goog-Signature``, ``X-Goog-Credential``, the older
  ``Signature``, ``AWSAccessKeyId``, ``GoogleAccessId``);
* the value of an ``Authorization`` header (``Bearer``, ``Basic`` or any scheme) and a bare ``Bearer <token>``;
* what is a secret by its shape wherever it stands: a PEM block (``-----BEGIN ... PRIVATE KEY-----``, also cut
  short), a Databricks token (``dapi``, ``dkea``, ``dose``, ``dsapi`` followed by hex), a JSON web token.

So a whole JSON credential file quoted in a message (a service account's, an authorized user's) keeps its
structure and loses every secret. Each value becomes ``***``; the names stay, so a message still says what was
sent.
"""

from __future__ import annotations

import re

#: The password of a URL's user info anywhere in a text: ``scheme://user:password@``.
_USERINFO_PASSWORD = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*):[^\s/@]*@")
#: Optional separator between the words of a name: ``refresh_token``, ``refresh-token``, ``refreshToken``.
_S = r"[_\-. ]?"
#: Names whose value is a credential (matched case-insensitively, as a whole word of the text).
_SECRET_NAMES = "|".join(
    [
        r"x-amz-signature",
        r"x-amz-credential",
        r"x-amz-security-token",
        r"x-goog-signature",
        r"x-goog-credential",
        r"signature",
        r"sig",
        r"awsaccesskeyid",
        r"googleaccessid",
        rf"shared{_S}access{_S}signature",
        rf"(?:aws{_S})?(?:access|refresh|id|session|security|sas|auth|bearer|oauth|api|private|client){_S}token",
        r"token",
        rf"client{_S}secret",
        rf"(?:aws{_S})?secret(?:{_S}access)?{_S}key",
        rf"(?:account|access|api|storage|shared|master|primary|secondary){_S}key",
        rf"private{_S}key(?:{_S}id)?",
        rf"(?:client{_S})?assertion",
        r"secret",
        r"password",
        r"passwd",
        r"pwd",
        r"passphrase",
    ]
)
#: A name may carry a prefix of its own words: ``aws_session_token``, ``x-refresh-token``, ``my.client_secret``.
_NAME = rf"(?:[A-Za-z0-9]+[_\-.])*(?:{_SECRET_NAMES})"
#: ``name=value`` in a query string, form body, connection string or environment-like line.
_ASSIGNED = re.compile(rf"(?i)(?<![A-Za-z0-9_.-])({_NAME})(\s*=\s*)[^&;\s\"'<>,]*")
#: ``"name": "value"`` or ``'name': 'value'`` (JSON, a printed dict), the value in its quotes.
_QUOTED = re.compile(
    rf"""(?i)(["'])({_NAME})\1(\s*:\s*)(["'])(?:\\.|(?!\4)[^\\])*\4""",
)
#: The same inside another string, its quotes escaped: ``\"name\": \"value\"``.
_ESCAPED = re.compile(rf"""(?i)(?<!\\)(\\+["'])({_NAME})\1(\s*:\s*)(\\+["']).{{0,16384}}?\4""")
#: ``name: value`` as a header line or an unquoted field (up to white space, a quote, a comma or a brace).
_HEADER = re.compile(
    rf"(?i)(?<![A-Za-z0-9_.-])((?:{_NAME}|authorization|proxy-authorization)[\"']?\s*:\s*)"
    r"([\"']?)(?:(?:bearer|basic|token|sharedkey|digest|negotiate)\s+)?[^\s\"',}&]+"
)
#: A bare ``Bearer <token>`` wherever it is quoted.
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}")
#: A PEM block (a private key, a certificate), also one cut short by a message's length limit.
_PEM = re.compile(r"(-----BEGIN [A-Z0-9 ]+-----)(?:.*?(-----END [A-Z0-9 ]+-----)|.*)", re.DOTALL)
#: Databricks personal access tokens and OAuth secrets, and JSON web tokens (``id_token``s, access tokens).
_SHAPED = re.compile(
    r"\b(?:dapi|dkea|dose|dsapi)[0-9a-f]{16,}(?:-\d+)?\b|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*)?"
)


def scrub(text: str) -> str:
    """``text`` with every credential it quotes (see the module's docstring) replaced by ``***``."""
    text = _PEM.sub(lambda match: f"{match[1]}***{match[2] or ''}", text)
    text = _USERINFO_PASSWORD.sub(r"\1:***@", text)
    text = _QUOTED.sub(r"\1\2\1\3\4***\4", text)
    text = _ESCAPED.sub(r"\1\2\1\3\4***\4", text)
    text = _ASSIGNED.sub(r"\1\2***", text)
    text = _HEADER.sub(r"\1\2***", text)
    text = _BEARER.sub(r"\1 ***", text)
    return _SHAPED.sub("***", text)
