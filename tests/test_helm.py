"""The Helm chart, with the real helm and checkov: it lints and renders with each value set of its ci/ directory, every
rendered object fits the others (selectors, ports, names, mounts), the exporter accepts the configuration and
arguments it is given and starts with them and its files as the pod mounts them, the Prometheus Operator's objects
follow the cluster's API (helm install against a fake API server's discovery, and its notes), values.schema.json
types every value as the exporter reads it and refuses wrong ones by name, checkov finds nothing to fail in the
chart's output, the Dockerfile or the CloudFormation template, and the plain manifests of deploy/kubernetes are the
chart's output."""

from __future__ import annotations

import base64
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from tools import checkov, helm

from exporter.cli.main import build_parser

ROOT = Path(__file__).parent.parent
CHART = ROOT / "deploy" / "helm" / "elasticache-exporter"
VALUE_SETS = sorted(path.name for path in (CHART / "ci").glob("*-values.yaml"))
SCHEMA = CHART / "values.schema.json"
# helm template asks no cluster: these say the Prometheus Operator's API is served, as a cluster's discovery would
OPERATOR_V1 = ["--api-versions", "monitoring.coreos.com/v1"]  # ServiceMonitor, PrometheusRule
OPERATOR = [*OPERATOR_V1, "--api-versions", "monitoring.coreos.com/v1alpha1"]  # and AlertmanagerConfig
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule", "AlertmanagerConfig"}
PLAIN = {
    "elasticache-exporter.yaml": [*OPERATOR_V1],
    "elasticache-exporter-sharded.yaml": [*OPERATOR_V1, "--set", "shards=3"],
    "elasticache-exporter-autosharded.yaml": [*OPERATOR_V1, "--set", "autosharding.enabled=true", "--set", "shards=3"],
}


def template(*args: str) -> str:
    result = render(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def render(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [helm(), "template", "elasticache-exporter", str(CHART), "--namespace", "monitoring", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def objects(text: str) -> dict[str, list[dict]]:
    by_kind: dict[str, list[dict]] = {}
    for document in yaml.safe_load_all(text):
        if document:
            by_kind.setdefault(document["kind"], []).append(document)
    return by_kind


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


@pytest.fixture(scope="module", params=VALUE_SETS)
def rendered(request) -> tuple[str, str, dict[str, list[dict]]]:
    text = template(*OPERATOR, "-f", str(CHART / "ci" / request.param))
    return request.param, text, objects(text)


def test_helm_lint_passes_with_every_value_set():
    """helm lint validates the values against values.schema.json too: the defaults and every value set meet it."""
    for values in [None, *VALUE_SETS]:
        args = [] if values is None else ["-f", str(CHART / "ci" / values)]
        result = subprocess.run([helm(), "lint", "--strict", str(CHART), *args], capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, (values, result.stdout + result.stderr)


@pytest.mark.unit
def test_every_object_fits_the_others(rendered):
    name, _, by_kind = rendered
    workloads = by_kind.get("Deployment", []) + by_kind.get("StatefulSet", [])
    assert len(workloads) == 1, name
    workload = workloads[0]
    pod = workload["spec"]["template"]
    assert matches(workload["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"])
    container = pod["spec"]["containers"][0]
    container_ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert container_ports == {"metrics": 9769}
    (service,) = by_kind["Service"]
    assert matches(service["spec"]["selector"], pod["metadata"]["labels"])
    assert [port["targetPort"] for port in service["spec"]["ports"]] == ["metrics"]
    (monitor,) = by_kind["ServiceMonitor"]
    assert matches(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    assert {endpoint["port"] for endpoint in monitor["spec"]["endpoints"]} == {port["name"] for port in service["spec"]["ports"]}
    (policy,) = by_kind["NetworkPolicy"]
    assert matches(policy["spec"]["podSelector"]["matchLabels"], pod["metadata"]["labels"])
    assert [port["port"] for rule in policy["spec"]["ingress"] for port in rule["ports"]] == ["metrics"]
    for kind, items in by_kind.items():
        for item in items:
            if kind != "ConfigMap" or "dashboard" not in item["metadata"]["name"]:
                assert item["metadata"]["namespace"] == "monitoring", (kind, item["metadata"]["name"])
    # what the pod mounts exists: the ConfigMap, and the Secrets unless the user brings them
    secrets = {item["metadata"]["name"] for item in by_kind.get("Secret", [])}
    configmaps = {item["metadata"]["name"] for item in by_kind.get("ConfigMap", [])}
    for volume in pod["spec"]["volumes"]:
        if "configMap" in volume:
            assert volume["configMap"]["name"] in configmaps
        elif volume["secret"]["secretName"] not in secrets:
            users_own = {"elasticache-redis-credentials", "elasticache-exporter-web-tls"}  # the value sets' existingSecret and tlsSecret
            assert volume["secret"]["secretName"] in users_own, "only a user's own Secret may be absent"
    mounts = {mount["name"] for mount in container["volumeMounts"]}
    assert mounts == {volume["name"] for volume in pod["spec"]["volumes"]}
    # the token only where the pods read their StatefulSet's replicas, with a Role that allows that one get
    autosharded = "--scrape.shard-statefulset" in container["args"]
    assert pod["spec"]["automountServiceAccountToken"] is autosharded
    assert ("Role" in by_kind, "RoleBinding" in by_kind) == (autosharded, autosharded)
    security = container["securityContext"]
    assert (security["readOnlyRootFilesystem"], security["allowPrivilegeEscalation"], security["capabilities"]["drop"]) == (True, False, ["ALL"])
    assert pod["spec"]["securityContext"]["runAsUser"] == 65532
    assert pod["spec"]["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert "cpu" in container["resources"]["limits"]


def test_the_exporter_accepts_its_configuration_and_arguments(rendered, tmp_path):
    from exporter.common.sharding import parse_shard
    from exporter.config import build_config

    name, _, by_kind = rendered
    (config_map,) = [item for item in by_kind["ConfigMap"] if "config.yml" in item["data"]]
    config = yaml.safe_load(config_map["data"]["config.yml"])
    for target in config.get("targets", []):
        target.pop("password_file", None)  # the files exist in the pod only
    if "aws" in config:
        config["aws"]["discovered"].pop("password_file", None)
    built = build_config(config, environ={})
    workload = (by_kind.get("Deployment") or by_kind["StatefulSet"])[0]
    container = workload["spec"]["template"]["spec"]["containers"][0]
    replicas = workload["spec"]["replicas"]
    shards = []
    for ordinal in range(replicas):
        argv = [expand_pod_variables(arg, ordinal) for arg in container["args"]]
        args = build_parser().parse_args(argv)
        assert getattr(args, "config.file") == "/etc/elasticache-exporter/config.yml"
        if workload["kind"] == "StatefulSet":
            shards.append(parse_shard(getattr(args, "scrape.shard")))
    if workload["kind"] == "StatefulSet":
        env = {item["name"]: item for item in container["env"]}
        assert env["POD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['apps.kubernetes.io/pod-index']"
        if any(shard.auto for shard in shards):  # the count is the StatefulSet's replicas, read by each pod
            assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
            _autosharding_reads_its_own_statefulset(by_kind, workload, container)
            shards = [shard.with_count(replicas) for shard in shards if shard.count == 0]
        assert [(shard.index, shard.count) for shard in shards] == [(i, replicas) for i in range(replicas)]
        names = [f"sessions-{i:03d}-001" for i in range(300)]
        assert sorted(node for shard in shards for node in names if shard.owns(node)) == sorted(names)
        assert by_kind["Service"][0]["spec"]["clusterIP"] == "None"
        assert workload["spec"]["serviceName"] == by_kind["Service"][0]["metadata"]["name"]
    if name == "one-target-values.yaml":
        assert [target.name for target in built.targets] == ["sessions"]
        endpoints = by_kind["ServiceMonitor"][0]["spec"]["endpoints"]
        scraped = [(e["path"], e["params"], e["relabelings"][0]["replacement"]) for e in endpoints]
        assert scraped == [("/scrape", {"target": ["sessions"]}, "sessions")]
    if name == "discovery-irsa-values.yaml":
        account = by_kind["ServiceAccount"][0]
        assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].endswith(":role/elasticache-exporter")
        assert [account.regions for account in built.aws.accounts] == [("eu-west-1", "us-east-1")]
        assert "@sha256:" in container["image"]
        (dashboard,) = [item for item in by_kind["ConfigMap"] if "dashboard" in item["metadata"]["name"]]
        assert dashboard["metadata"]["namespace"] == "grafana"
    if name == "web-tls-values.yaml":
        _web_config_is_accepted(by_kind, container, tmp_path)


def expand_pod_variables(arg: str, ordinal: int) -> str:
    """``$(POD_INDEX)`` and ``$(POD_NAMESPACE)`` as the kubelet expands them for the pod of ``ordinal`` (in monitoring)."""
    return arg.replace("$(POD_INDEX)", str(ordinal)).replace("$(POD_NAMESPACE)", "monitoring")


def _autosharding_reads_its_own_statefulset(by_kind: dict[str, list[dict]], workload: dict, container: dict) -> None:
    """The pods read the replicas of their own StatefulSet, which the Role allows them to get (that one object, nothing
    else), bound to the pod's service account, through the NetworkPolicy's egress to the API server."""
    from exporter.common.sharding import parse_statefulset

    args = container["args"]
    statefulset = parse_statefulset(expand_pod_variables(args[args.index("--scrape.shard-statefulset") + 1], 0))
    assert (statefulset.namespace, statefulset.name) == (workload["metadata"]["namespace"], workload["metadata"]["name"])
    (role,) = by_kind["Role"]
    assert role["rules"] == [{"apiGroups": ["apps"], "resources": ["statefulsets"], "resourceNames": [statefulset.name], "verbs": ["get"]}]
    (binding,) = by_kind["RoleBinding"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]}
    account = workload["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "monitoring"}]
    (policy,) = by_kind["NetworkPolicy"]
    assert {port["port"] for rule in policy["spec"]["egress"] for port in rule["ports"]} >= {443, 6443}


def _web_config_is_accepted(by_kind: dict[str, list[dict]], container: dict, tmp_path: Path) -> None:
    """The web config the chart puts in its Secret loads in the exporter, with certificates where it names them."""
    import bcrypt
    from servers import make_certificates

    from exporter.service.webconfig import load_web_config

    args = container["args"]
    path = args[args.index("--web.config-file") + 1]
    (secret,) = [item for item in by_kind["Secret"] if "web-config" in item["metadata"]["name"]]
    web = yaml.safe_load(secret["stringData"][Path(path).name])
    certificates = make_certificates(tmp_path)
    web["tls_server_config"].update(cert_file=certificates["server_cert"], key_file=certificates["server_key"])
    (tmp_path / "web-config.yml").write_text(yaml.safe_dump(web))
    loaded = load_web_config(str(tmp_path / "web-config.yml"))
    assert loaded.ssl_context is not None
    assert bcrypt.checkpw(b"example-scrape-password", loaded.users["prometheus"])
    assert "tcpSocket" in container["readinessProbe"]  # behind basic auth an HTTP probe would be refused
    assert by_kind["ServiceMonitor"][0]["spec"]["endpoints"][0]["scheme"] == "https"


MOUNT_ROOT = "/etc/elasticache-exporter"
NO_AWS_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "",
    "AWS_SECRET_ACCESS_KEY": "",
    "AWS_SESSION_TOKEN": "",
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}


def lay_out_pod_files(by_kind: dict[str, list[dict]], container: dict, pod: dict, root: Path) -> None:
    """The files of the pod's volumes at their mount paths under ``root``: the ConfigMap's and the chart's Secrets'
    keys, and for a Secret of the user's own, the files the mounted configuration names under its mount (certificates
    where a TLS Secret would hold them). Paths under the mount root in those files are rewritten to ``root``."""
    from servers import make_certificates

    volumes = {volume["name"]: volume for volume in pod["spec"]["volumes"]}
    objects_by_name = {(kind, item["metadata"]["name"]): item for kind in ("ConfigMap", "Secret") for item in by_kind.get(kind, [])}
    mounted_text = []
    user_secret_mounts = []
    certificates: dict[str, str] = {}
    for mount in container["volumeMounts"]:
        volume, directory = volumes[mount["name"]], root / mount["mountPath"].lstrip("/")
        directory.mkdir(parents=True, exist_ok=True)
        if "configMap" in volume:
            files = objects_by_name[("ConfigMap", volume["configMap"]["name"])]["data"]
        elif ("Secret", volume["secret"]["secretName"]) in objects_by_name:
            secret = objects_by_name[("Secret", volume["secret"]["secretName"])]
            files = {**secret.get("stringData", {}), **{k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()}}
        else:
            user_secret_mounts.append(mount["mountPath"])
            continue
        for name, text in (files or {}).items():
            (directory / name).write_text(text.replace(MOUNT_ROOT, str(root / MOUNT_ROOT.lstrip("/"))))
            mounted_text.append(text)
    for mount_path in user_secret_mounts:
        for name in sorted(set(re.findall(re.escape(mount_path) + r"/([\w.-]+)", "\n".join(mounted_text)))):
            content = "a-password-from-the-users-secret\n"
            if name in ("tls.crt", "tls.key"):
                if not (root.parent / "certificates").exists():
                    (root.parent / "certificates").mkdir()
                    certificates.update(make_certificates(root.parent / "certificates"))
                content = Path(certificates["server_cert" if name == "tls.crt" else "server_key"]).read_text()
            (root / mount_path.lstrip("/") / name).write_text(content)


@pytest.mark.parametrize("values", [None, *VALUE_SETS])
def test_the_exporter_starts_as_the_pod_runs_it(values, tmp_path):
    """Every value set, the defaults too: the container's args as rendered (the first shard's), its files where the pod
    mounts them, no AWS credentials; /-/healthy answers (over TLS with basic auth where the web config asks) and the
    exporter is still up once discovery has failed for want of credentials."""
    from servers import free_port, wait_until

    by_kind = objects(template(*([] if values is None else ["-f", str(CHART / "ci" / values)])))
    workload = (by_kind.get("Deployment") or by_kind["StatefulSet"])[0]
    pod = workload["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    root = tmp_path / "pod"
    lay_out_pod_files(by_kind, container, pod, root)
    args = [expand_pod_variables(arg, 0).replace(MOUNT_ROOT, str(root / MOUNT_ROOT.lstrip("/"))) for arg in container["args"]]
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("ELASTICACHE_EXPORTER_", "AWS_"))}
    environment.update(NO_AWS_CREDENTIALS)
    log = tmp_path / "exporter.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "exporter", *args, "--web.listen-address", f"127.0.0.1:{port}"],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=environment,
        )
    web = "--web.config-file" in args
    context = ssl._create_unverified_context() if web else None  # noqa: S323 - the test's own throwaway certificate
    headers = {"Authorization": "Basic " + base64.b64encode(b"prometheus:example-scrape-password").decode()} if web else {}

    def get(path: str) -> tuple[int, str]:
        if process.poll() is not None:
            raise AssertionError(f"exporter exited with {process.returncode}: {log.read_text()}")
        request = urllib.request.Request(f"{'https' if web else 'http'}://127.0.0.1:{port}{path}", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=2, context=context) as response:
                return response.status, response.read().decode()
        except OSError:
            return 0, ""

    try:
        wait_until(lambda: get("/-/healthy")[0] == 200, timeout=30, what="/-/healthy")
        if by_kind["ConfigMap"][0]["data"]["config.yml"].startswith("aws:"):
            wait_until(lambda: "elasticache_exporter_aws_api_errors_total{" in get("/metrics")[1], timeout=60, what="a failed AWS call")
        assert get("/-/healthy")[0] == 200
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_the_rules_and_dashboard_are_the_shipped_ones(rendered):
    _, _, by_kind = rendered
    (rule,) = by_kind["PrometheusRule"]
    # the shipped rules, with the exporter's job its ServiceMonitor scrapes as: the Service's name
    assert rule["spec"] == yaml.safe_load(rendered_rules(exporter_job=rule["metadata"]["name"]))
    (dashboard,) = [item for item in by_kind["ConfigMap"] if "dashboard" in item["metadata"]["name"]]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["elasticache-exporter.json"]) == json.loads((ROOT / "dashboards" / "elasticache-exporter.json").read_text())
    operator_object = yaml.safe_load((ROOT / "rules" / "prometheus-operator" / "elasticache-exporter.alertmanagerconfig.yaml").read_text())
    if "AlertmanagerConfig" not in by_kind:  # off by default
        return
    (config,) = by_kind["AlertmanagerConfig"]
    assert config["apiVersion"] == operator_object["apiVersion"]
    assert config["spec"]["route"] == operator_object["spec"]["route"]
    assert config["spec"]["inhibitRules"] == operator_object["spec"]["inhibitRules"]
    # a receiver the values give replaces the rendered one of its name; the others stay as rendered
    receivers = {receiver["name"]: receiver for receiver in config["spec"]["receivers"]}
    assert set(receivers) == {receiver["name"] for receiver in operator_object["spec"]["receivers"]}
    assert receivers["elasticache-critical"]["webhookConfigs"] == [{"url": "http://pager.example.internal/elasticache"}]
    assert receivers["elasticache-info"] == {"name": "elasticache-info"}


def rendered_rules(**options: str) -> str:
    from exporter.alerts.catalog import load_catalog
    from exporter.alerts.prometheus import render_prometheus
    from exporter.baselines.table import load_table

    return render_prometheus(load_catalog(), load_table(), **options)


def test_the_alert_values_set_what_render_s_options_set():
    """alerts.source, alerts.runbookBaseUrl and alerts.exporterJob: the PrometheusRule is `render prometheus` with the same
    options, and the AlertmanagerConfig routes and inhibits on the same source; a source no matcher can hold is refused."""
    from exporter.alerts.alertmanager import render_alertmanager_config
    from exporter.alerts.catalog import load_catalog

    base = "https://wiki.example/cache/runbooks.md"
    values = ["--set", "alerts.source=cache-team", "--set", f"alerts.runbookBaseUrl={base}", "--set", "alerts.exporterJob=ecx|cache-mon"]
    by_kind = objects(template(*OPERATOR, *values, "--set", "alertmanagerConfig.enabled=true"))
    (rule,) = by_kind["PrometheusRule"]
    assert rule["spec"] == yaml.safe_load(rendered_rules(runbook_base=base, source="cache-team", exporter_job="ecx|cache-mon"))
    (config,) = by_kind["AlertmanagerConfig"]
    expected = yaml.safe_load(render_alertmanager_config(load_catalog(), source="cache-team"))["spec"]
    assert config["spec"]["route"] == expected["route"]
    assert config["spec"]["inhibitRules"] == expected["inhibitRules"]
    assert config["spec"]["route"]["matchers"] == [{"name": "alert_source", "value": "cache-team", "matchType": "="}]
    refused = subprocess.run(
        [helm(), "template", "x", str(CHART), *OPERATOR, "--set", "alerts.source=a b"], capture_output=True, text=True, timeout=120, check=False
    )
    assert refused.returncode != 0
    assert 'alerts.source "a b": use letters, digits and _.:/-' in refused.stderr


def test_the_alertmanager_config_is_off_by_default():
    assert "kind: AlertmanagerConfig" not in template(*OPERATOR)


def test_the_operators_objects_are_rendered_only_where_its_api_is_served():
    """helm template asks no cluster: without --api-versions it renders no ServiceMonitor, PrometheusRule or
    AlertmanagerConfig (enabled or not) and everything else the same; monitoring.coreos.com/v1 brings the first two,
    v1alpha1 the AlertmanagerConfig."""
    enabled = ["--set", "alertmanagerConfig.enabled=true"]
    without = objects(template(*enabled))
    assert not OPERATOR_KINDS & set(without)
    assert OPERATOR_KINDS & set(objects(template(*OPERATOR_V1, *enabled))) == {"ServiceMonitor", "PrometheusRule"}
    with_all = objects(template(*OPERATOR, *enabled))
    assert set(with_all) >= OPERATOR_KINDS
    assert {kind: items for kind, items in with_all.items() if kind not in OPERATOR_KINDS} == without


# the kinds the chart renders, by the group version a cluster serves them in, as its discovery lists them
CLUSTER_RESOURCES = {
    "v1": {"ServiceAccount": "serviceaccounts", "Secret": "secrets", "ConfigMap": "configmaps", "Service": "services"},
    "apps/v1": {"Deployment": "deployments", "StatefulSet": "statefulsets"},
    "rbac.authorization.k8s.io/v1": {"Role": "roles", "RoleBinding": "rolebindings"},
    "networking.k8s.io/v1": {"NetworkPolicy": "networkpolicies"},
}
OPERATOR_RESOURCES = {
    "monitoring.coreos.com/v1": {"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"},
    "monitoring.coreos.com/v1alpha1": {"AlertmanagerConfig": "alertmanagerconfigs"},
}


@pytest.fixture(params=[False, True], ids=["without-the-operator", "with-the-operator"])
def cluster(request, tmp_path):
    """A kubeconfig of a fake API server that answers what `helm install --dry-run=client` asks (its version and the
    discovery of its groups and kinds), serving the Prometheus Operator's CRDs or not. A kind it does not list fails
    the install as a real cluster's would ("no matches for kind ... ensure CRDs are installed first")."""
    resources = CLUSTER_RESOURCES | (OPERATOR_RESOURCES if request.param else {})

    class Api(BaseHTTPRequestHandler):
        def do_GET(self):
            path = self.path.split("?")[0]
            group_versions = {f"/api{'s' if '/' in gv else ''}/{gv}": gv for gv in resources}
            groups: dict[str, list[str]] = {}
            for gv in resources:
                if "/" in gv:
                    groups.setdefault(gv.split("/")[0], []).append(gv)
            if path == "/version":
                body = {"major": "1", "minor": "31", "gitVersion": "v1.31.0"}
            elif path == "/api":
                body = {"kind": "APIVersions", "versions": ["v1"]}
            elif path == "/apis":
                body = {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [
                        {
                            "name": name,
                            "versions": [{"groupVersion": gv, "version": gv.split("/")[1]} for gv in versions],
                            "preferredVersion": {"groupVersion": versions[0], "version": versions[0].split("/")[1]},
                        }
                        for name, versions in groups.items()
                    ],
                }
            elif path in group_versions:
                gv = group_versions[path]
                kinds = [{"name": name, "namespaced": True, "kind": kind, "verbs": ["get"]} for kind, name in resources[gv].items()]
                body = {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": kinds}
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps(body).encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
                "users": [{"name": "fake", "user": {}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                "current-context": "fake",
            }
        )
    )
    yield request.param, kubeconfig
    server.shutdown()
    server.server_close()


RUNBOOKS = "https://github.com/example-org/elasticache-exporter/blob/main/docs/runbooks.md"
KUBE_PROMETHEUS_STACK = [
    "--set",
    "serviceMonitor.additionalLabels.release=kube-prometheus-stack",
    "--set",
    "prometheusRule.additionalLabels.release=kube-prometheus-stack",
    "--set",
    f"alerts.runbookBaseUrl={RUNBOOKS}",
]


@pytest.mark.parametrize("values", [KUBE_PROMETHEUS_STACK, []], ids=["labels-and-runbooks", "defaults"])
def test_helm_install_creates_what_the_cluster_serves_and_its_notes_say_so(cluster, values):
    """`helm install` (--dry-run=client: the cluster's API and discovery, nothing created) succeeds on a cluster
    without the Prometheus Operator, leaving its objects out, and its notes warn that nothing was created for them;
    with the operator, they are created and the notes name the labels a Prometheus selects them by (or say there is
    none of the user's) and the runbook links (or warn that they are relative)."""
    operator, kubeconfig = cluster
    install = [helm(), "install", "elasticache-exporter", str(CHART), "--namespace", "monitoring", "--kubeconfig", str(kubeconfig)]
    dry_run = ["--dry-run=client", "--disable-openapi-validation", "--output", "json"]
    result = subprocess.run(
        [*install, *dry_run, "--set", "alertmanagerConfig.enabled=true", *values], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    release = json.loads(result.stdout)
    created, notes = set(objects(release["manifest"])), release["info"]["notes"]
    assert {"Deployment", "Service", "ConfigMap", "NetworkPolicy"} <= created
    if not operator:
        assert not OPERATOR_KINDS & created
        assert "WARNING: no ServiceMonitor or PrometheusRule was created: the cluster serves no monitoring.coreos.com/v1" in notes
        assert "WARNING: no AlertmanagerConfig was created: the cluster serves no monitoring.coreos.com/v1alpha1" in notes
        assert "labelled" not in notes
        return
    assert created >= OPERATOR_KINDS
    assert "was created" not in notes
    for kind, key, selector in [("ServiceMonitor", "serviceMonitor", "serviceMonitorSelector"), ("PrometheusRule", "prometheusRule", "ruleSelector")]:
        if values:
            assert f"{kind} elasticache-exporter, labelled release=kube-prometheus-stack\n({key}.additionalLabels): its {selector}" in notes
        else:
            assert f"{kind} elasticache-exporter, which has no label of yours\n({key}.additionalLabels)" in notes
            assert f"kube-prometheus-stack's {selector} wants release=<its release name>" in notes
    if values:
        assert f"links its runbook (runbook_url):\n  {RUNBOOKS}#<its section>\n" in notes
        assert "WARNING" not in notes
    else:
        assert "WARNING: alerts.runbookBaseUrl is not set" in notes


@pytest.mark.unit
def test_the_charts_copies_are_up_to_date():
    rules = (ROOT / "rules" / "prometheus" / "elasticache-exporter.rules.yml").read_text()
    assert (CHART / "files" / "elasticache-exporter.rules.yml").read_text() == rules, (
        "stale: elasticache-exporter render prometheus --out deploy/helm/elasticache-exporter/files"
    )
    assert (CHART / "files" / "elasticache-exporter.json").read_text() == (ROOT / "dashboards" / "elasticache-exporter.json").read_text(), (
        "stale: cp dashboards/elasticache-exporter.json deploy/helm/elasticache-exporter/files/"
    )
    operator_object = ROOT / "rules" / "prometheus-operator" / "elasticache-exporter.alertmanagerconfig.yaml"
    assert (CHART / "files" / operator_object.name).read_text() == operator_object.read_text(), (
        "stale: elasticache-exporter render prometheus-operator --out rules/prometheus-operator, and cp its "
        "elasticache-exporter.alertmanagerconfig.yaml into deploy/helm/elasticache-exporter/files/"
    )


@pytest.mark.parametrize(("plain", "args"), PLAIN.items())
def test_the_plain_manifests_are_the_charts_output(plain, args):
    command = f"helm template elasticache-exporter deploy/helm/elasticache-exporter --namespace monitoring {' '.join(args)}"
    assert (ROOT / "deploy" / "kubernetes" / plain).read_text() == template(*args), f"stale: {command} > deploy/kubernetes/{plain}"


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("config.scrape.timeout=5", "at '/config/scrape/timeout': got number, want null or string"),  # a duration takes its unit
        ("config.scrape.timeout=5x", "at '/config/scrape/timeout': '5x' does not match pattern"),
        ("config.heartbeat.read=maybe", "at '/config/heartbeat/read': 'maybe' does not match pattern"),
        ("config.scrape.concurency=8", "at '/config/scrape': additional properties 'concurency' not allowed"),
        ("shards=three", "at '/shards': got string, want integer"),
        ("serviceMonitor.interval=30", "at '/serviceMonitor/interval': got number, want string"),
        ("serviceMonitor.additionalLabels.release=1", "at '/serviceMonitor/additionalLabels/release': got number, want string"),
        ("replicas=2", "at '': additional properties 'replicas' not allowed"),
    ],
)
def test_the_schema_refuses_a_wrong_value_by_name(value, named):
    """helm refuses, before rendering anything, a value of the wrong type or a key the chart (or the exporter) does not
    know, naming it; install and lint validate the same way as template."""
    result = render("--set", value)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert named in result.stderr, result.stderr


def documented_configurations() -> list[tuple[str, dict]]:
    """The exporter's configurations the README and docs/ show: each YAML block whose keys are all configuration keys."""
    from exporter.config.declared import TOP

    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for match in re.finditer(r"^```ya?ml\n(.*?)^```", page.read_text(), re.MULTILINE | re.DOTALL):
            block = yaml.safe_load(match.group(1))
            if isinstance(block, dict) and block and set(block) <= TOP.keys():
                found.append((f"{page.name}:{page.read_text()[: match.start()].count(chr(10)) + 1}", block))
    return found


def test_the_schema_takes_every_documented_configuration_and_refuses_the_bad_inputs_it_can_tell(tmp_path):
    """Loose enough: every configuration the docs show is a valid `config` value. Strict enough: of the configurations
    the exporter refuses (tests/bad_inputs/config), the schema refuses those whose problem is a type or a key: a
    duration without its unit, a list for a duration, a misspelt key of a target or of redis."""
    documented = documented_configurations()
    assert len(documented) >= 10
    for name, config in documented:
        values = tmp_path / "values.yaml"
        values.write_text(yaml.safe_dump({"config": config}))
        result = render("-f", str(values), "--show-only", "templates/configmap.yaml")
        assert result.returncode == 0, f"{name}: {result.stderr}"
    bad = {
        "bare_duration": "/config/scrape/timeout",
        "wrong_type": "/config/scrape/timeout",
        "typo": "/config/targets/0",
        "wrong_name": "/config/redis",
    }
    for name, at in bad.items():
        values = tmp_path / "values.yaml"
        values.write_text(yaml.safe_dump({"config": yaml.safe_load((ROOT / "tests" / "bad_inputs" / "config" / f"{name}.yml").read_text())}))
        result = render("-f", str(values))
        assert result.returncode != 0, name
        assert f"at '{at}'" in result.stderr, (name, result.stderr)


def config_schema_at(schema: dict, path: str) -> dict:
    """The schema of the configuration's mapping at ``path`` (``scrape``, ``targets[].iam_auth``...), references followed
    (and of a mapping or a scalar, the mapping)."""

    def follow(node: dict) -> dict:
        while "$ref" in node or "anyOf" in node:
            if "$ref" in node:
                node = schema["definitions"][node["$ref"].removeprefix("#/definitions/")]
            else:
                (node,) = [choice for choice in node["anyOf"] if "properties" in choice]
        return node

    node = follow(schema["properties"]["config"])
    for part in filter(None, path.split(".")):
        node = follow(node["properties"][part.removesuffix("[]")])
        if part.endswith("[]"):
            node = follow(node["items"])
    return node


def config_definition(kind: str) -> str:
    """The schema's definition for a reader's kind, as the settings table names it."""
    if kind.startswith(("integer ", "size ")):
        return {"integer": "configInteger", "size": "configSize"}[kind.split(maxsplit=1)[0]]
    named = {"duration": "duration", "boolean": "configBoolean", "key list": "configKeyList", "list of groups": "configList"}
    return named.get(kind, "configNumber" if kind == "USD a month" else "configString")


@pytest.mark.unit
def test_the_schema_of_config_is_the_exporters_keys_typed_by_their_readers():
    """Every mapping of the configuration file has in the schema exactly the keys the exporter reads (it refuses any
    other, so the schema refusing one refuses nothing valid), each read by a setting with the definition of its
    reader's kind: a new key or a changed type fails here until values.schema.json follows."""
    from exporter.config.declared import CLUSTER, CREDENTIALS, GROUPS, KEYS, TARGET, TOP

    schema = json.loads(SCHEMA.read_text())
    mappings: dict[str, dict] = {"": {s.key: s for s in TOP.settings}, "targets[].keys": {s.key: s for s in KEYS.settings}}
    for group in (*GROUPS, CLUSTER):
        mappings.setdefault(group.path, {}).update({s.key: s for s in group.settings})
        if group.more_keys:  # a target's and an allow rule's credentials
            mappings[group.path].update({s.key: s for s in CREDENTIALS.settings})
    # as build_config reads them: the flags' single target (a target without name, group, shard and keys), and the
    # discovered nodes' credentials with iam_auth: true
    mappings["redis"] = {s.key: s for s in (*TARGET.settings, *CREDENTIALS.settings) if s.key not in ("name", "replication_group", "shard", "keys")}
    mappings["aws.discovered"] = {s.key: s for s in CREDENTIALS.settings}
    for path, settings in mappings.items():
        node = config_schema_at(schema, path)
        expected = set(settings) | ({"iam_auth", "labels"} if path == "aws.discovered" else set())
        assert set(node["properties"]) == expected, (path, set(node["properties"]) ^ expected)
        assert node["additionalProperties"] is False, path
        for key, setting in settings.items():
            if setting.reader is not None:
                assert node["properties"][key] == {"$ref": f"#/definitions/{config_definition(setting.kind)}"}, (path, key, setting.kind)
    assert config_schema_at(schema, "aws.discovered")["properties"]["iam_auth"] == {"$ref": "#/definitions/configBoolean"}
    for path in ("targets[]", "redis", "aws.discovered"):  # a target's static labels: a mapping of strings
        assert config_schema_at(schema, path)["properties"]["labels"] == {"$ref": "#/definitions/configLabels"}, path


def schema_accepts(definition: dict, value: object) -> bool:
    """JSON Schema's type and pattern, the two keywords of the configuration's leaf definitions."""
    types = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "null": type(None), "array": list, "object": dict}
    kinds = definition["type"] if isinstance(definition["type"], list) else [definition["type"]]
    typed = any(isinstance(value, types[kind]) and not (isinstance(value, bool) and kind in ("integer", "number")) for kind in kinds)
    return typed and not (isinstance(value, str) and "pattern" in definition and not re.search(definition["pattern"], value))


@pytest.mark.unit
def test_the_schemas_leaf_types_take_what_the_exporters_readers_take():
    """Whatever a reader accepts, its definition accepts (so no valid configuration is refused); a bare number for a
    duration, a word for a boolean or an integer, a mapping for a string, it refuses, as the reader does."""
    from exporter.common.errors import ConfigError
    from exporter.config.declared import BOOL, KEY_LIST, duration, integer, size
    from exporter.config.readers import as_string

    definitions = json.loads(SCHEMA.read_text())["definitions"]
    readers = {
        "duration": duration().read,
        "configBoolean": BOOL.read,
        "configInteger": integer(-(10**9), 10**9).read,
        "configSize": size(1, 2**40).read,
        "configString": as_string,
        "configKeyList": KEY_LIST.read,
    }
    samples = [5, 5.5, -3, "5", " 7 ", "5s", " 5s ", "500ms", "1.5m", "2h", "4MiB", "512 KiB", "1.5gb", "10b", "true", "False", "YES"]
    samples += ["no", "0", "1", "maybe", "five", "db0=queue:*", True, False, [], ["db0=a", "db1=b"], [1, 2], {}, {"a": 1}]
    for name, read in readers.items():
        for value in samples:
            try:
                read(value, "key")
            except ConfigError:
                continue
            assert schema_accepts(definitions[name], value), (name, value)
    refused = {"duration": [5, "5", [1, 2]], "configBoolean": ["maybe", 1, []], "configInteger": ["five", True], "configString": [True, {}, []]}
    for name, values in refused.items():
        for value in values:
            assert not schema_accepts(definitions[name], value), (name, value)


def run_checkov(path: Path, framework: str) -> str:
    result = subprocess.run(
        [checkov(), "--file", str(path), "--framework", framework, "--compact", "--quiet", "--skip-download", "--output", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
    )
    report = json.loads(result.stdout)
    reports = report if isinstance(report, list) else [report]
    failed = [(check["check_id"], check["resource"]) for item in reports for check in item.get("results", {}).get("failed_checks", [])]
    passed = sum(item.get("summary", {}).get("passed", 0) for item in reports)
    assert not failed, f"{path.name}: {failed}"
    assert passed > 0, f"{path.name}: checkov ran no check ({result.stderr[-500:]})"
    return result.stdout


def test_checkov_fails_nothing_in_the_charts_output(rendered, tmp_path):
    name, text, _ = rendered
    path = tmp_path / name
    path.write_text(text)
    run_checkov(path, "kubernetes")


def test_checkov_fails_nothing_in_the_dockerfile_and_the_alarm_template():
    run_checkov(ROOT / "Dockerfile", "dockerfile")
    run_checkov(ROOT / "rules" / "cloudformation" / "elasticache-alarms.yaml", "cloudformation")
