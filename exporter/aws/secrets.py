"""Passwords kept in AWS Secrets Manager: fetched at start-up, held in memory only, and fetched again after the
server refused one (the secret was rotated), at most once a minute per secret and never inside a scrape's deadline.
Errors name the secret, never its value."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from exporter.common.errors import RuntimeFailure
from exporter.common.secrets import Secret, SecretUnavailable

log = logging.getLogger(__name__)

REFETCH_INTERVAL = 60.0  # seconds: the least time between two fetches of one secret

Fetch = Callable[[str, str | None], str]  # (secret id, region or None) -> the secret's string


def secret_region(secret_id: str) -> str | None:
    """The region of a secret named by its ARN (arn:aws:secretsmanager:<region>:<account>:secret:<name>); None for a
    name, which is looked up in the default region."""
    parts = secret_id.split(":")
    return parts[3] if secret_id.startswith("arn:") and len(parts) > 6 and parts[3] else None


def fetch_with_boto3(secret_id: str, region: str | None) -> str:
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"total_max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=10, user_agent_extra="elasticache-exporter"
    )
    client = boto3.session.Session().client("secretsmanager", region_name=region, config=config)
    reply = client.get_secret_value(SecretId=secret_id)
    if "SecretString" not in reply:
        raise ValueError("the secret holds binary data, not a string")
    return reply["SecretString"]


class SecretsManagerPassword(Secret):
    """The password in a Secrets Manager secret: its whole string, or one key of a JSON secret (``json_key``)."""

    def __init__(
        self,
        secret_id: str,
        *,
        json_key: str | None = None,
        source: str,
        fetch: Fetch = fetch_with_boto3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(source=source)
        self.secret_id = secret_id
        self.json_key = json_key
        self._fetch = fetch
        self._clock = clock
        self._value: str | None = None
        self._last_fetch: float | None = None
        self._fetching = False
        self._lock = threading.Lock()
        self.fetches = 0
        self.failures = 0
        self.refetch_interval = REFETCH_INTERVAL

    def prepare(self) -> None:
        """At start-up: the secret is fetched once, in the caller's thread; a failure stops the start (exit 1)."""
        error = self._refresh()
        if error is not None:
            raise RuntimeFailure(f"{self.source}: {error}")

    def reveal(self) -> str:
        with self._lock:
            value = self._value
        if value is None:
            self._refresh_in_background()
            raise SecretUnavailable(f"secret {self.secret_id!r} has not been read from Secrets Manager yet")
        return value

    def refused(self) -> None:
        self._refresh_in_background()

    def _refresh_in_background(self) -> None:
        with self._lock:
            due = self._last_fetch is None or self._clock() - self._last_fetch >= self.refetch_interval
            if self._fetching or not due:
                return
            self._fetching = True
        threading.Thread(target=self._refresh, name="secret-fetch", daemon=True).start()

    def _refresh(self) -> str | None:
        """Fetch the secret; returns what went wrong (naming the secret, never its value), or None."""
        with self._lock:
            self._last_fetch = self._clock()
            self._fetching = True
            self.fetches += 1
        try:
            text = self._fetch(self.secret_id, secret_region(self.secret_id))
            value = self._pick(text)
        except Exception as err:  # noqa: BLE001 - botocore raises many kinds; one line names the secret and the kind
            error = f"cannot read secret {self.secret_id!r} from Secrets Manager: {_describe(err)}"
            with self._lock:
                self.failures += 1
                self._fetching = False
            log.warning("%s: %s", self.source, error)
            return error
        with self._lock:
            changed = self._value is not None and self._value != value
            self._value = value
            self._fetching = False
        if changed:
            log.info("%s: secret %r read again: the password changed", self.source, self.secret_id)
        return None

    def _pick(self, text: str) -> str:
        if self.json_key is None:
            return text
        try:
            document = json.loads(text)
        except ValueError:
            raise ValueError(f"the secret is not JSON, so it has no key {self.json_key!r}") from None
        value = document.get(self.json_key) if isinstance(document, dict) else None
        if not isinstance(value, str):
            raise ValueError(f"the secret's JSON has no string under {self.json_key!r}")
        return value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SecretsManagerPassword) and (other.secret_id, other.json_key) == (self.secret_id, self.json_key)

    def __hash__(self) -> int:
        return hash((self.secret_id, self.json_key))


def _describe(err: BaseException) -> str:
    """The error's kind and AWS's code, without the text of a reply that could quote what was sent."""
    response: Any = getattr(err, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code", "")
        return f"{type(err).__name__} ({code})" if code else type(err).__name__
    return f"{type(err).__name__}: {str(err)[:200]}"
