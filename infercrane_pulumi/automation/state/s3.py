"""The S3 state bucket's door for what the engine never does: list a stack's old history and
delete it (``retention``). Nothing else of the product talks to S3; the engine reads and writes
the state itself.

Two requests, ListObjectsV2 and DeleteObject, signed with AWS Signature Version 4 from the
standard library: an SDK (boto3, tens of megabytes) for two calls is not worth shipping. So the
keys come only from the variables the engine's own S3 client reads first (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``); the engine's other sources (profiles, SSO,
instance roles) are not followed, and ``bucket`` says so before a run writes anything. The URL
is read as the engine's reads it: ``s3://<bucket>[/<prefix>]?region=&endpoint=&use_path_style=``.
Failures are one-line typed errors naming the bucket, never a key or a server's words.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from xml.etree import ElementTree

from infercrane_pulumi.errors import BackendRefusedError, BackendUnavailableError, ConfigError

SCHEME = "s3"
DEFAULT_REGION = "us-east-1"
TIMEOUT_SECONDS = 30
_XMLNS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_HTTP_FORBIDDEN = (401, 403)
_HTTP_OK = (200, 204)


@dataclass(frozen=True)
class Bucket:
    name: str
    prefix: str  # the URL's path: every key of the state is under it ("" or ending in "/")
    endpoint: urllib.parse.SplitResult  # scheme and host of the service
    path_style: bool
    region: str
    access_key: str
    secret_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)

    @property
    def shown(self) -> str:
        return f"s3://{self.name}/{self.prefix}"


def bucket(url: str, environ: Mapping[str, str]) -> Bucket:
    """The bucket a backend URL names, with the keys ``environ`` holds; ``ConfigError`` when
    it holds none (see the module's docstring)."""
    parts = urllib.parse.urlsplit(url)
    query = dict(urllib.parse.parse_qsl(parts.query))
    region = query.get("region") or environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    region = region or DEFAULT_REGION
    endpoint = urllib.parse.urlsplit(query.get("endpoint") or f"https://s3.{region}.amazonaws.com")
    prefix = parts.path.strip("/")
    access_key, secret_key = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
    if not parts.hostname or endpoint.scheme not in ("http", "https") or not endpoint.hostname:
        raise ConfigError(f"backend s3://{parts.netloc}: not a bucket URL with a valid endpoint")
    if not access_key or not secret_key:
        raise ConfigError(
            f"backend s3://{parts.netloc}: pruning its history needs AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY in the environment (profiles and instance roles are not read)"
        )
    return Bucket(
        name=parts.netloc,
        prefix=f"{prefix}/" if prefix else "",
        endpoint=endpoint,
        path_style=query.get("use_path_style", query.get("s3ForcePathStyle", "")).lower() == "true",
        region=region,
        access_key=access_key,
        secret_key=secret_key,
        session_token=environ.get("AWS_SESSION_TOKEN") or None,
    )


def keys(where: Bucket, prefix: str) -> list[str]:
    """Every key under ``prefix`` (relative to the bucket's own prefix), relative likewise."""
    found: list[str] = []
    token: str | None = None
    while True:
        query = {"list-type": "2", "prefix": where.prefix + prefix}
        if token is not None:
            query["continuation-token"] = token
        status, body = request(where, "GET", "", query)
        if status != http.client.OK:
            raise _failed(where, status)
        try:
            root = ElementTree.fromstring(body)
        except ElementTree.ParseError:
            raise BackendUnavailableError(f"backend {where.shown}: listed not in XML") from None
        found.extend(
            (node.text or "").removeprefix(where.prefix) for node in root.iter(f"{_XMLNS}Key")
        )
        token = root.findtext(f"{_XMLNS}NextContinuationToken")
        if root.findtext(f"{_XMLNS}IsTruncated") != "true" or not token:
            return found


def get(where: Bucket, key: str) -> bytes | None:
    """``key``'s contents (relative to the bucket's prefix); None when there is no such key."""
    status, body = request(where, "GET", where.prefix + key, {})
    if status == http.client.NOT_FOUND:
        return None
    if status != http.client.OK:
        raise _failed(where, status)
    return body


def delete(where: Bucket, key: str) -> None:
    """Delete ``key`` (relative to the bucket's prefix); deleting a missing key succeeds."""
    status, _ = request(where, "DELETE", where.prefix + key, {})
    if status not in _HTTP_OK:
        raise _failed(where, status)


def _failed(where: Bucket, status: int) -> BackendRefusedError | BackendUnavailableError:
    if status in _HTTP_FORBIDDEN:
        return BackendRefusedError(f"backend {where.shown}: refused (HTTP {status}): credentials")
    return BackendUnavailableError(f"backend {where.shown}: answered HTTP {status}")


def request(where: Bucket, method: str, key: str, query: Mapping[str, str]) -> tuple[int, bytes]:
    """One signed request without a body (the bucket's prefix not added to ``key``): its
    status and its body."""
    host = where.endpoint.netloc
    path = "/" + urllib.parse.quote(key, safe="/-_.~")
    if where.path_style:
        path = f"/{where.name}" + path
    else:
        host = f"{where.name}.{host}"
    canonical_query = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in sorted(query.items())
    )
    headers = _signed(where, method, host, path, canonical_query)
    connection_class = (
        http.client.HTTPSConnection
        if where.endpoint.scheme == "https"
        else http.client.HTTPConnection
    )
    connection = connection_class(host, timeout=TIMEOUT_SECONDS)
    try:
        target = path + (f"?{canonical_query}" if canonical_query else "")
        connection.request(method, target, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    except OSError:
        raise BackendUnavailableError(f"backend {where.shown}: unreachable") from None
    finally:
        connection.close()


def _signed(
    where: Bucket, method: str, host: str, path: str, canonical_query: str
) -> dict[str, str]:
    """The request's headers with its AWS Signature Version 4 (no body: the empty hash)."""
    now = datetime.datetime.now(datetime.UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    headers = {"host": host, "x-amz-content-sha256": _EMPTY_SHA256, "x-amz-date": stamp}
    if where.session_token is not None:
        headers["x-amz-security-token"] = where.session_token
    names = ";".join(sorted(headers))
    lines = [f"{name}:{headers[name]}" for name in sorted(headers)]
    canonical = "\n".join([method, path, canonical_query, *lines, "", names, _EMPTY_SHA256])
    scope = f"{day}/{where.region}/s3/aws4_request"
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, digest])
    signing = ("AWS4" + where.secret_key).encode()
    for part in (day, where.region, "s3", "aws4_request"):
        signing = hmac.new(signing, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={where.access_key}/{scope}, "
        f"SignedHeaders={names}, Signature={signature}"
    )
    return headers
