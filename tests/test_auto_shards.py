"""Automated sharding (``scrape.shard INDEX/auto``): the shard count is the replicas of the pod's own StatefulSet, read
from the Kubernetes API (a front of it here, tests/kubernetes_api.py), so scaling the StatefulSet re-shards. The reading
and its failures are tested directly; then the chart's StatefulSet, rendered, runs as processes (one per ordinal, with
the pod's arguments and environment) over 300 targets, and every target is served by exactly one pod as the fake API's
replicas go 3 -> 4 -> 2 and the pods come and go."""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import call, parse_samples
from kubernetes_api import FakeKubernetesApi
from servers import ExporterProcess, start_exporter, start_redis, wait_until
from tools import helm

from exporter.common.errors import ConfigError, ConfigErrors
from exporter.common.sharding import Shard, StatefulSetRef, hashmod, parse_shard, parse_statefulset
from exporter.config import build_config
from exporter.service.kubernetes import InClusterApi, KubernetesError, ShardCount, in_cluster_api, read_replicas, replicas_of
from exporter.service.server import ExporterApp

ROOT = Path(__file__).parent.parent
CHART = ROOT / "deploy" / "helm" / "elasticache-exporter"
NAMESPACE, NAME = "monitoring", "elasticache-exporter"
NAMES = [f"sessions-{i:03d}" for i in range(300)]


@pytest.fixture
def api(tmp_path):
    fake = FakeKubernetesApi(tmp_path, NAMESPACE, NAME, replicas=3)
    yield fake
    fake.stop()


def api_of(fake: FakeKubernetesApi, service_account: Path | None = None) -> InClusterApi:
    return in_cluster_api(fake.environ, str(service_account or fake.service_account))


# --- the setting


@pytest.mark.unit
def test_index_auto_owns_nothing_until_its_count_is_read():
    shard = parse_shard("2/auto")
    assert (shard.index, shard.count, shard.auto, shard.known, str(shard)) == (2, 0, True, False, "2/auto")
    assert not any(shard.owns(name) for name in NAMES)
    three = shard.with_count(3)
    assert str(three) == "2/auto (3)"
    assert [name for name in NAMES if three.owns(name)] == [name for name in NAMES if hashmod(name, 3) == 2]
    assert not any(shard.with_count(2).owns(name) for name in NAMES), "an index beyond the count (a pod being scaled away) owns nothing"
    assert all(parse_shard("0/auto").with_count(1).owns(name) for name in NAMES)
    for text in ("a/auto", "1024/auto", "1/Auto", "auto", "1/auto/2", "-1/auto"):
        with pytest.raises(ValueError, match=r"must|index"):
            parse_shard(text)


@pytest.mark.unit
def test_auto_needs_the_statefulset_and_reads_its_settings():
    with pytest.raises(ConfigError, match=r"'scrape\.shard_statefulset': is required with scrape\.shard 1/auto"):
        build_config({"redis": {"addr": ""}, "scrape": {"shard": "1/auto"}}, environ={})
    raw = {"redis": {"addr": ""}, "scrape": {"shard": "1/auto", "shard_statefulset": "monitoring/elasticache-exporter", "shard_refresh": "10s"}}
    config = build_config(raw, environ={})
    assert (config.shard, config.shard_statefulset, config.shard_refresh) == (Shard(1, 0, auto=True), StatefulSetRef(NAMESPACE, NAME), 10.0)
    assert config.shard_service_account_dir == "/var/run/secrets/kubernetes.io/serviceaccount"
    from exporter.cli.config_flags import load_config
    from exporter.cli.main import build_parser

    environ = {"ELASTICACHE_EXPORTER_SCRAPE_SHARD": "0/auto", "ELASTICACHE_EXPORTER_SCRAPE_SHARD_STATEFULSET": "ns/sts"}
    from_env = load_config(build_parser().parse_args(["serve", "--redis.addr", "", "--scrape.shard-refresh", "5s"]), environ)
    assert (from_env.shard, from_env.shard_statefulset, from_env.shard_refresh) == (Shard(0, 0, auto=True), StatefulSetRef("ns", "sts"), 5.0)
    for text in ("elasticache-exporter", "Monitoring/x", "ns/a/b", "$(POD_NAMESPACE)/x", "ns/"):
        with pytest.raises(ValueError, match="NAMESPACE/NAME"):
            parse_statefulset(text)
    with pytest.raises((ConfigError, ConfigErrors), match=r"scrape\.shard_refresh"):
        build_config({"redis": {"addr": ""}, "scrape": {"shard": "0/auto", "shard_statefulset": "a/b", "shard_refresh": "100ms"}}, environ={})
    assert StatefulSetRef(NAMESPACE, NAME).path == "/apis/apps/v1/namespaces/monitoring/statefulsets/elasticache-exporter"


# --- reading the count


@pytest.mark.unit
def test_replicas_of_a_statefulset_and_what_is_refused():
    assert replicas_of(b'{"kind": "StatefulSet", "spec": {"replicas": 4}}', "here") == 4
    assert replicas_of(b'{"kind": "StatefulSet", "spec": {}}', "here") == 1  # the API's default
    for body, problem in (
        (b"<html>502 Bad Gateway</html>", "here: not JSON"),
        (b"\xff\xfe", "here: not JSON"),
        (b"[]", "here: not a StatefulSet"),
        (b'{"kind": "Status", "code": 500}', "here: not a StatefulSet"),
        (b'{"kind": "StatefulSet", "spec": {"replicas": "3"}}', "spec.replicas must be 0 to 1024, got '3'"),
        (b'{"kind": "StatefulSet", "spec": {"replicas": 5000}}', "spec.replicas must be 0 to 1024, got 5000"),
        (b'{"kind": "StatefulSet", "spec": {"replicas": true}}', "spec.replicas must be"),
    ):
        with pytest.raises(KubernetesError, match=re.escape(problem)):
            replicas_of(body, "here")


@pytest.mark.unit
def test_the_api_is_read_as_documented_with_the_token_of_the_moment(api, tmp_path):
    statefulset = StatefulSetRef(NAMESPACE, NAME)
    assert read_replicas(api_of(api), statefulset) == 3
    api.replicas = 5
    api.rotate_token("the-rotated-token")  # the old one is refused from now on: the file is read again
    assert read_replicas(api_of(api), statefulset) == 5
    assert api.requests == [(statefulset.path, 200), (statefulset.path, 200)]

    with pytest.raises(KubernetesError, match=r"forbidden \(403\): the service account needs get on this StatefulSet") as forbidden:
        read_replicas(api_of(api), StatefulSetRef(NAMESPACE, "another"))
    assert "/statefulsets/another" in str(forbidden.value)

    stale = tmp_path / "stale-account"
    stale.mkdir()
    (stale / "token").write_text("a-token-the-api-no-longer-takes")
    (stale / "ca.crt").write_bytes((api.service_account / "ca.crt").read_bytes())
    with pytest.raises(KubernetesError, match=r"the service account token was refused \(401\)") as refused:
        read_replicas(api_of(api, stale), statefulset)
    assert "a-token-the-api-no-longer-takes" not in str(refused.value)

    api.body_override = b'{"kind": "StatefulSet", "spec": {"replicas": '
    with pytest.raises(KubernetesError, match="not JSON"):
        read_replicas(api_of(api), statefulset)
    api.body_override = None

    (stale / "ca.crt").write_bytes(Path(__file__).parent.joinpath("kubernetes_api.py").read_bytes())  # not a certificate
    with pytest.raises(KubernetesError, match="token or CA cannot be read"):
        read_replicas(api_of(api, stale), statefulset)
    with pytest.raises(KubernetesError, match="token or CA cannot be read"):
        read_replicas(api_of(api, tmp_path / "no-such-account"), statefulset)

    api.rotate_token("a-token-with\na-line-break")  # a header cannot carry it: refused before any request, never quoted
    with pytest.raises(KubernetesError, match="token is empty or holds characters a header cannot carry") as broken:
        read_replicas(api_of(api), statefulset)
    assert "a-token-with" not in str(broken.value)
    api.rotate_token("the-rotated-token")
    api.redirect_to = f"http://127.0.0.1:{api.port}/elsewhere"  # the token is never sent on to another address
    with pytest.raises(KubernetesError, match=r"HTTP 307"):
        read_replicas(api_of(api), statefulset)
    assert api.requests[-1] == (statefulset.path, 307)
    api.redirect_to = None

    api.stop()  # the API down: connection refused
    with pytest.raises(KubernetesError, match=re.escape(f"GET https://127.0.0.1:{api.port}{statefulset.path}: ")):
        read_replicas(api_of(api), statefulset, timeout=2)
    with pytest.raises(KubernetesError, match="not in a Kubernetes pod: KUBERNETES_SERVICE_HOST"):
        in_cluster_api({}, str(api.service_account))


@pytest.mark.unit
def test_a_failed_read_keeps_the_last_count_and_each_change_is_applied_once(caplog):
    caplog.set_level(logging.INFO, logger="exporter.service.kubernetes")
    outcomes: list[int | Exception] = []
    applied: list[Shard] = []

    def read() -> int:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    counter = ShardCount(parse_shard("1/auto"), read, applied.append, interval=30, source="StatefulSet monitoring/x")
    assert "scrape.shard 1/auto: waiting for the replicas of StatefulSet monitoring/x before serving any target" in caplog.text
    outcomes += [KubernetesError("GET https://api/x: connection refused"), KubernetesError("GET https://api/x: connection refused")]
    assert counter.check() == Shard(1, 0, auto=True)
    assert counter.check() == Shard(1, 0, auto=True)
    assert (applied, counter.failures) == ([], 2)
    assert caplog.text.count("cannot be read, serving no target until it is known: GET https://api/x: connection refused") == 1

    outcomes += [3, 3]
    assert counter.check() == Shard(1, 3, auto=True)
    assert counter.check() == Shard(1, 3, auto=True)
    assert applied == [Shard(1, 3, auto=True)]  # a count that did not change is not applied again
    assert "readable again" in caplog.text
    assert "StatefulSet monitoring/x has 3 replicas: shard 1/auto (3), was 1/auto" in caplog.text

    outcomes += [KubernetesError("GET https://api/x: the service account token was refused (401)"), KubernetesError("not JSON"), ValueError("a bug")]
    for _ in range(3):
        assert counter.check() == Shard(1, 3, auto=True)
    assert "keeping count 3: GET https://api/x: the service account token was refused (401)" in caplog.text
    assert "reading the replicas of StatefulSet monitoring/x" in caplog.text  # our own bug, logged with its trace, survived
    assert counter.failures == 5

    outcomes += [1]
    assert counter.check() == Shard(1, 1, auto=True)
    assert "this pod's index is beyond it, so it serves no target" in caplog.text
    assert applied == [Shard(1, 3, auto=True), Shard(1, 1, auto=True)]


@pytest.mark.unit
def test_the_reader_retries_sooner_until_the_first_count_then_every_refresh():
    outcomes: list[int | Exception] = [KubernetesError("down"), KubernetesError("down"), 2, 2]
    delays: list[float] = []

    def read() -> int:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def wait(seconds: float) -> bool:  # the injected clock: records each wait, stops once every outcome is read
        delays.append(seconds)
        return not outcomes

    ShardCount(parse_shard("0/auto"), read, lambda shard: None, interval=30, source="s", wait=wait).run()
    assert delays == [5.0, 5.0, 30, 30]


@pytest.mark.unit
def test_the_app_serves_no_target_until_the_count_is_read_and_stays_ready_to_say_so(api, monkeypatch):
    for key, value in api.environ.items():
        monkeypatch.setenv(key, value)
    api.replicas = 0  # no count yet: a StatefulSet scaled to zero owns nothing either
    targets = [{"name": name, "addr": "redis://127.0.0.1:1"} for name in NAMES[:60]]
    raw = {
        "targets": targets,
        "scrape": {"shard": "1/auto", "shard_statefulset": f"{NAMESPACE}/{NAME}", "shard_service_account_dir": str(api.service_account)},
    }
    app = ExporterApp(build_config(raw, environ={}))
    try:
        wait_until(lambda: len(api.requests) >= 1, what="the first read")
        assert app.targets.on_metrics() == []
        # ready all the same: Prometheus scrapes it and sees its read errors (ElastiCacheExporterShardCountUnread)
        assert call(app, "/-/ready").code == 200
        assert "elasticache_exporter_shard_count_read_errors_total 0.0" in call(app, "/metrics").text
        assert "elasticache_exporter_shard_info" not in call(app, "/metrics").text
        # a reload meanwhile: the new app starts from the running app's count, reads its own, then serves its shard
        api.replicas = 2
        reloaded = ExporterApp(build_config(raw, environ={}), running_shard=Shard(1, 2, auto=True))
        try:
            assert {t.name for t in reloaded.targets.on_metrics()} == {name for name in NAMES[:60] if hashmod(name, 2) == 1}
            assert call(reloaded, "/-/ready").code == 200
        finally:
            reloaded.close()
    finally:
        app.close()


# --- the chart's StatefulSet, as processes


def rendered_statefulset(*values: str) -> dict:
    result = subprocess.run(
        [helm(), "template", "elasticache-exporter", str(CHART), "--namespace", NAMESPACE, *values],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (workload,) = [item for item in yaml.safe_load_all(result.stdout) if item and item["kind"] == "StatefulSet"]
    return workload


def pod_environment(container: dict, ordinal: int, metadata: dict[str, str]) -> dict[str, str]:
    """The container's environment as the kubelet makes it: each fieldRef's value of this pod."""
    fields = {
        "metadata.labels['apps.kubernetes.io/pod-index']": str(ordinal),
        "metadata.namespace": metadata["namespace"],
        "metadata.name": f"{metadata['name']}-{ordinal}",
    }
    environment = {}
    for item in container["env"]:
        environment[item["name"]] = item["value"] if "value" in item else fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
    return environment


def expand(arg: str, environment: dict[str, str]) -> str:
    """``$(VAR)`` as the kubelet expands it in args."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda match: environment.get(match.group(1), match.group(0)), arg)


class StatefulSetPods:
    """The rendered StatefulSet's pods as exporter processes: each with the container's args and environment as the
    kubelet makes them for its ordinal, this test's config file in place of the ConfigMap's and the fake API's service
    account and address."""

    def __init__(self, workload: dict, config: Path, api: FakeKubernetesApi) -> None:
        (self.container,) = workload["spec"]["template"]["spec"]["containers"]
        self.metadata, self.config, self.api = workload["metadata"], config, api
        self.running: dict[int, ExporterProcess] = {}

    def start(self, ordinal: int) -> None:
        environment = pod_environment(self.container, ordinal, self.metadata)
        args = [expand(arg, environment) for arg in self.container["args"]]
        assert args[0] == "serve"
        args[args.index("--config.file") + 1] = str(self.config)
        test_only = ["--scrape.shard-refresh", "1s", "--scrape.shard-service-account-dir", str(self.api.service_account)]
        self.running[ordinal] = start_exporter(*args[1:], *test_only, env={**environment, **self.api.environ})

    def stop(self, ordinal: int) -> None:
        self.running.pop(ordinal).stop()

    def served_by(self) -> dict[str, list[int]] | None:
        """Which pod serves each target on /metrics, once every pod tells the API's replicas; None before."""
        served: dict[str, list[int]] = {}
        for ordinal, pod in self.running.items():
            told = ("elasticache_exporter_shard_info", (("count", str(self.api.replicas)), ("index", str(ordinal))))
            if told not in parse_samples(pod.get("/metrics")[1]):
                return None
            # the next scrape starts after the pod told the new count: all of it is by that count (a scrape the change
            # overtook may have walked its targets by the old count and told the new one after)
            status, body = pod.get("/metrics", timeout=30)
            assert status == 200
            for (name, labels), value in parse_samples(body).items():
                if name == "redis_up":
                    assert value == 1
                    served.setdefault(dict(labels)["instance"], []).append(ordinal)
        return served

    def assert_each_target_served_once(self) -> None:
        served = wait_until(self.served_by, timeout=60, interval=0.5, what=f"every pod on {self.api.replicas} replicas")
        assert served == {name: [hashmod(name, self.api.replicas)] for name in NAMES}
        assert [pod.get("/-/ready")[0] for pod in self.running.values()] == [200] * len(self.running)


def test_the_charts_pods_serve_every_target_once_as_the_statefulset_scales(api, tmp_path):
    workload = rendered_statefulset("--set", "autosharding.enabled=true", "--set", "shards=3")
    assert (workload["metadata"]["name"], workload["spec"]["replicas"]) == (NAME, 3)
    servers = [start_redis(), start_redis()]
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"targets": [{"name": name, "addr": servers[i % 2].addr} for i, name in enumerate(NAMES)]}))
    pods = StatefulSetPods(workload, config, api)
    try:
        for ordinal in range(3):
            pods.start(ordinal)
        pods.assert_each_target_served_once()
        api.rotate_token("a-token-rotated-by-the-kubelet")  # read again for each request: the pods carry on
        api.replicas = 4  # kubectl scale statefulset elasticache-exporter --replicas=4: a new pod
        pods.start(3)
        pods.assert_each_target_served_once()
        api.replicas = 2  # --replicas=2: pods 3 and 2 go
        pods.stop(3)
        pods.stop(2)
        pods.assert_each_target_served_once()
        for pod in pods.running.values():
            assert "a-token-rotated-by-the-kubelet" not in pod.log()
            assert f"StatefulSet {NAMESPACE}/{NAME} has 2 replicas" in pod.log()
    finally:
        for ordinal in list(pods.running):
            pods.stop(ordinal)
        for server in servers:
            server.stop()


def test_the_pods_keep_their_count_while_the_api_refuses_them_or_is_down(api, tmp_path):
    server = start_redis()
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"targets": [{"name": name, "addr": server.addr} for name in NAMES[:30]]}))
    account = tmp_path / "pod-account"  # the pod's copy of the token: a token the API stops taking is refused
    shutil.copytree(api.service_account, account)
    args = ["--config.file", str(config), "--scrape.shard", "0/auto", "--scrape.shard-statefulset", f"{NAMESPACE}/{NAME}"]
    args += ["--scrape.shard-refresh", "1s", "--scrape.shard-service-account-dir", str(account)]
    api.replicas = 2
    pod = start_exporter(*args, env=api.environ)
    try:
        owned = {name for name in NAMES[:30] if hashmod(name, 2) == 0}

        def instances() -> set[str]:
            samples = parse_samples(pod.get("/metrics")[1])
            return {dict(labels)["instance"] for name, labels in samples if name == "redis_up"}

        wait_until(lambda: instances() == owned, what="the shard of 2")
        api.rotate_token("a-token-the-pod-does-not-have")
        api.replicas = 3  # not seen while refused: the pod keeps serving its shard of 2
        wait_until(lambda: [code for _, code in api.requests].count(401) >= 2, what="two refused reads")
        assert instances() == owned
        assert re.search(r"^elasticache_exporter_shard_count_read_errors_total [1-9]", pod.get("/metrics")[1], re.MULTILINE)
        assert "the service account token was refused (401)" in pod.log()
        api.stop()  # and the API gone altogether
        wait_until(lambda: "Connection refused" in pod.log(), what="a failed connection logged")
        assert instances() == owned
        assert pod.get("/-/ready")[0] == 200
        assert pod.process.poll() is None
        assert "first-token-of-the-service-account" not in pod.log()
    finally:
        pod.stop()
        server.stop()
