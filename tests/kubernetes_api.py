"""A front for the one Kubernetes API call the exporter makes, as the API documents it: ``GET
/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}`` over HTTPS, with the service account's token as a Bearer
token. It answers 401 (a Status) to a missing or wrong token, which it compares with the token file's current content
(so a rotated token must be read again), 403 to another StatefulSet (the Role's resourceNames grant one), 404 to any
other path, and otherwise the StatefulSet with ``spec.replicas`` as the test sets it. Served in a thread on loopback
with a certificate of the test's CA; ``service_account`` is a directory laid out as Kubernetes mounts it (token,
ca.crt, namespace)."""

from __future__ import annotations

import json
import shutil
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from servers import make_certificates


def status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}


def statefulset(namespace: str, name: str, replicas: int) -> dict:
    labels = {"app.kubernetes.io/name": "elasticache-exporter", "app.kubernetes.io/instance": name}
    return {
        "kind": "StatefulSet",
        "apiVersion": "apps/v1",
        "metadata": {"name": name, "namespace": namespace, "uid": "4f6f1ad6-6a53-4c8f-9e61-52b1c2c4f0d1", "generation": replicas},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "exporter", "image": "elasticache-exporter"}]}},
        },
        "status": {"replicas": replicas, "availableReplicas": replicas, "observedGeneration": replicas},
    }


class FakeKubernetesApi:
    def __init__(self, directory: Path, namespace: str, name: str, replicas: int) -> None:
        self.namespace, self.name, self.replicas = namespace, name, replicas
        self.body_override: bytes | None = None  # a reply in place of the StatefulSet (bad JSON, say)
        self.redirect_to: str | None = None  # a 307 to this address in place of the reply (no API server does)
        self.requests: list[tuple[str, int]] = []  # (path, status) of every request, in order
        self.service_account = directory / "serviceaccount"
        self.service_account.mkdir(parents=True)
        certificates = make_certificates(directory)
        shutil.copy(certificates["ca"], self.service_account / "ca.crt")
        (self.service_account / "namespace").write_text(namespace)
        self.rotate_token("first-token-of-the-service-account")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificates["server_cert"], certificates["server_key"])
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's name
                code, body = api.answer(self.path, self.headers.get("Authorization", ""))
                if api.redirect_to is not None:
                    code, body = 307, b""
                api.requests.append((self.path, code))
                self.send_response(code)
                if code == 307:
                    self.send_header("Location", str(api.redirect_to))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def environ(self) -> dict[str, str]:
        """What the kubelet puts in a container's environment for the API."""
        return {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(self.port)}

    def rotate_token(self, token: str) -> None:
        """As the kubelet rotates a projected token: the file's content changes in place, the old token is refused."""
        (self.service_account / "token").write_text(token)

    def answer(self, path: str, authorization: str) -> tuple[int, bytes]:
        token = (self.service_account / "token").read_text()
        if authorization != f"Bearer {token}":
            return 401, json.dumps(status(401, "Unauthorized", "Unauthorized")).encode()
        parts = path.split("?", 1)[0].strip("/").split("/")
        if len(parts) != 7 or parts[:4] != ["apis", "apps", "v1", "namespaces"] or parts[5] != "statefulsets":
            return 404, json.dumps(status(404, "NotFound", "the server could not find the requested resource")).encode()
        namespace, name = parts[4], parts[6]
        if (namespace, name) != (self.namespace, self.name):
            message = (
                f'statefulsets.apps "{name}" is forbidden: User "system:serviceaccount:{self.namespace}:{self.name}" cannot get '
                f'resource "statefulsets" in API group "apps" in the namespace "{namespace}"'
            )
            return 403, json.dumps(status(403, "Forbidden", message)).encode()
        if self.body_override is not None:
            return 200, self.body_override
        return 200, json.dumps(statefulset(namespace, name, self.replicas)).encode()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
