"""CloudWatch's PromQL API through a front that checks what it receives as AWS does (SigV4 for the service monitoring,
the region, the credentials) over a real Prometheus 3 holding OpenTelemetry-shaped series: which nodes have the
metrics, and each of the API's limits as a clear error."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from promql_front import PromQLFront, otel_presence, start_otel_prometheus

from exporter.aws.promql_api import PromQLApi, PromQLError, otel_nodes, parse_vector, sign

REGION = "eu-west-1"
KEY, SECRET, TOKEN = "AKIDEXAMPLE", "secret-example", "token-example"


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    directory = tmp_path_factory.mktemp("otel")
    prometheus, exposition = start_otel_prometheus(directory, otel_presence(["shop-0001-001", "shop-0002-001"]))
    front = PromQLFront(prometheus.port, REGION, KEY, SECRET, TOKEN)
    try:
        yield front
    finally:
        front.stop()
        exposition.stop()
        prometheus.stop()


def _api(front: PromQLFront) -> PromQLApi:
    from botocore.credentials import Credentials

    return PromQLApi(lambda region: Credentials(KEY, SECRET, TOKEN), lambda region: front.url)


def test_the_nodes_with_opentelemetry_metrics_are_found_by_a_signed_query(front):
    assert otel_nodes(_api(front), REGION, ["shop-0001-001", "shop-0002-001", "legacy-0001-001"]) == {"shop-0001-001", "shop-0002-001"}
    assert front.refused == []
    assert '"@resource.aws.elasticache.node.id"=~"legacy-0001-001|shop-0001-001|shop-0002-001"' in front.queries[-1]


def test_the_front_refuses_what_aws_would(front):
    """The front's checks can fail: another service, another region, a body changed after signing."""
    from botocore.credentials import Credentials

    url = front.url + "/api/v1/query"
    body = b"query=up"
    for service, region, sent in (("cloudwatch", REGION, body), ("monitoring", "us-east-1", body), ("monitoring", REGION, b"query=down")):
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
        SigV4Auth(Credentials(KEY, SECRET, TOKEN), service, region).add_auth(request)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(url, data=sent, headers=dict(request.headers.items()), method="POST"), timeout=10)
        assert refused.value.code == 403
    assert len(front.refused) == 3
    assert "service cloudwatch" in front.refused[0]
    assert "region us-east-1" in front.refused[1]
    assert "signature does not match" in front.refused[2]
    front.refused.clear()
    headers = sign(Credentials(KEY, SECRET, TOKEN), REGION, url, body)  # the exporter's own signing is accepted
    with urllib.request.urlopen(urllib.request.Request(url, data=body, headers=headers, method="POST"), timeout=10) as reply:
        assert json.loads(reply.read())["status"] == "success"


@pytest.mark.parametrize(("answer", "kind"), [(422, "throttling"), (429, "concurrency"), ("truncated", "truncated")])
def test_each_limit_is_an_error_of_its_kind_and_never_a_partial_answer(front, answer, kind):
    front.answers.append(answer)
    with pytest.raises(PromQLError) as failed:
        otel_nodes(_api(front), REGION, ["shop-0001-001"])
    assert failed.value.kind == kind


def test_a_region_that_cannot_be_reached_is_a_connection_error():
    from botocore.credentials import Credentials
    from servers import free_port

    api = PromQLApi(lambda region: Credentials(KEY, SECRET, TOKEN), lambda region: f"http://127.0.0.1:{free_port()}", timeout=5)
    with pytest.raises(PromQLError) as failed:
        api.query(REGION, "up")
    assert failed.value.kind == "connection"


@pytest.mark.unit
def test_an_answer_that_is_no_vector_or_is_cut_is_refused():
    vector = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"a": "b"}, "value": [1, "2.5"]}]}}
    assert [(s.labels, s.value) for s in parse_vector(vector)] == [({"a": "b"}, 2.5)]
    with pytest.raises(PromQLError, match="expected a vector"):
        parse_vector({"status": "success", "data": {"resultType": "matrix", "result": []}})
    with pytest.raises(PromQLError, match="cut"):
        parse_vector({**vector, "warnings": ["result truncated to the maximum of 500 series"]})
