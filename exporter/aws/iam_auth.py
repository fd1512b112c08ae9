"""ElastiCache IAM authentication: the short-lived token a client signs with its AWS credentials and sends as
``AUTH <user> <token>``.

The token is AWS's documented one: a SigV4 query-string presign (service ``elasticache``, the cache's region, valid
900 s) of ``GET http://<cache>/?Action=connect&User=<user>`` (with ``&ResourceType=ServerlessCache`` for a serverless
cache), without the ``http://``. Signing is local; a token is signed on every (re)connect. ElastiCache closes an
IAM-authenticated connection after 12 hours, so such a connection is renewed before that (``MAX_CONNECTION_AGE``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from exporter.common.errors import ConfigError, RuntimeFailure
from exporter.common.records import record
from exporter.common.secrets import Secret, SecretUnavailable

TOKEN_EXPIRES = 900  # seconds, as AWS documents it
MAX_CONNECTION_AGE = 11 * 3600.0  # ElastiCache cuts IAM-authenticated connections at 12 hours; renewed an hour before


@record(frozen=True)
class IamAuth:
    """What a token signs for: the replication group (or serverless cache) and the user, in a region."""

    cache: str
    user: str
    region: str
    serverless: bool = False


def presign(auth: IamAuth, credentials: Any) -> str:
    """The token for ``auth``, signed now with botocore ``credentials``."""
    from botocore.auth import SigV4QueryAuth
    from botocore.awsrequest import AWSRequest

    params = {"Action": "connect", "User": auth.user}
    if auth.serverless:
        params["ResourceType"] = "ServerlessCache"
    request = AWSRequest(method="GET", url=f"http://{auth.cache}/", params=params)
    SigV4QueryAuth(credentials, "elasticache", auth.region, expires=TOKEN_EXPIRES).add_auth(request)
    return request.prepare().url.removeprefix("http://")


CredentialSource = Callable[[], Any]  # botocore credentials (refreshable), or None where the chain found none


def default_chain() -> Any:
    """The default credential chain of boto3 (environment, shared files, web identity, container and instance roles)."""
    import boto3

    return boto3.session.Session().get_credentials()


def resolved(source: CredentialSource) -> Any:
    """The credentials ``source`` gives (None: none found); its failure, whatever botocore raised, as one line."""
    try:
        return source()
    except Exception as err:  # noqa: BLE001 - botocore's providers raise many kinds; reported in one line
        raise SecretUnavailable(f"AWS credentials could not be had: {type(err).__name__}: {str(err)[:200]}") from None


def require_credentials(where: str, resolve: Callable[[], Any]) -> None:
    """At start-up: IAM needs credentials (exit 2 without any, exit 1 where looking for them failed)."""
    try:
        credentials = resolve()
    except SecretUnavailable as err:
        raise RuntimeFailure(f"{where}: {err}") from None
    if credentials is None:
        raise ConfigError(
            where,
            "IAM authentication needs AWS credentials and none were found (environment, shared "
            "credentials file, web identity, container or instance role)",
        )


class IamToken(Secret):
    """A password that is a freshly signed IAM token each time it is revealed (each connect)."""

    def __init__(self, auth: IamAuth, *, source: str, credentials: CredentialSource = default_chain) -> None:
        super().__init__(source=source)
        self.auth = auth
        self._credential_source = credentials
        self._credentials: Any = None
        self._lock = threading.Lock()

    def prepare(self) -> None:
        require_credentials(self.source, self._resolve)

    def _resolve(self) -> Any:
        with self._lock:
            if self._credentials is None:
                self._credentials = resolved(self._credential_source)
            return self._credentials

    def reveal(self) -> str:
        credentials = self._resolve()
        if credentials is None:
            raise SecretUnavailable("no AWS credentials to sign an IAM token with")
        try:
            frozen = credentials.get_frozen_credentials()  # a refreshable set renews itself here when near its expiry
        except Exception as err:  # noqa: BLE001
            raise SecretUnavailable(f"AWS credentials could not be refreshed: {type(err).__name__}") from None
        return presign(self.auth, frozen)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IamToken) and other.auth == self.auth

    def __hash__(self) -> int:
        return hash(self.auth)
