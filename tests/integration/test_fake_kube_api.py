"""The fake Kubernetes API of the enrollment tests (tests/fakes/fake_kube_api.py) answers as the
TokenReview contract says, so that the controller is tested against the contract and not against
a lenient stand-in: HTTPS with its cluster CA, bearer authentication (401) and RBAC (403) of the
caller, JSON only (415), the right object (400), one path (404) and method (405), and the status
of a review as the API server fills it in for good, unknown, expired and wrong-audience tokens."""
from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request

import pytest

from enrollment_site import AUDIENCE, CONTROLLER_USER, FakeKubeApi, make_serving_certificate

REVIEW = "/apis/authentication.k8s.io/v1/tokenreviews"


@pytest.fixture
def kube(tmp_path):
    ca, cert, key = make_serving_certificate(tmp_path, "127.0.0.1")
    fake = FakeKubeApi(cert, key).start()
    fake.ca = ca
    yield fake
    fake.stop()


def post(kube, body, bearer=None, path=REVIEW, content_type="application/json", method="POST"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(kube.url + path, data=data, method=method)
    request.add_header("Content-Type", content_type)
    if bearer:
        request.add_header("Authorization", f"Bearer {bearer}")
    context = ssl.create_default_context(cafile=str(kube.ca))
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def review(token, audiences=(AUDIENCE,)):
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token, "audiences": list(audiences)}}


def test_the_caller_must_authenticate_and_be_allowed(kube):
    assert post(kube, review("x"))[0] == 401
    assert post(kube, review("x"), bearer="made-up")[0] == 401
    denied = kube.add_caller("system:serviceaccount:rosetctl:rosetctl-node", allowed=False)
    code, status = post(kube, review("x"), bearer=denied)
    assert code == 403 and status["reason"] == "Forbidden" and "tokenreviews" in status["message"]


def test_only_a_json_tokenreview_at_its_path(kube):
    caller = kube.add_caller(CONTROLLER_USER)
    assert post(kube, review("x"), bearer=caller, content_type="text/plain")[0] == 415
    assert post(kube, {"apiVersion": "v1", "kind": "Pod"}, bearer=caller)[0] == 400
    assert post(kube, review(""), bearer=caller)[0] == 400
    assert post(kube, review("x"), bearer=caller, path="/apis/authentication.k8s.io/v1/selfsubjectreviews")[0] == 404
    assert post(kube, b"", bearer=caller, method="GET")[0] == 405
    # Not HTTPS with that CA: refused by the client.
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(kube.url.replace("https", "http") + REVIEW, data=b"{}", timeout=5)


def test_reviews_as_the_api_server_fills_them_in(kube):
    caller = kube.add_caller(CONTROLLER_USER)
    good = kube.issue("rosetctl", "rosetctl-node", [AUDIENCE], node="node-a", pod="rosetctl-node-abc")
    code, answer = post(kube, review(good), bearer=caller)
    assert code == 201 and answer["kind"] == "TokenReview" and answer["spec"]["token"] == good
    status = answer["status"]
    assert status["authenticated"] is True and status["audiences"] == [AUDIENCE]
    assert status["user"]["username"] == "system:serviceaccount:rosetctl:rosetctl-node"
    assert status["user"]["extra"]["authentication.kubernetes.io/node-name"] == ["node-a"]
    assert status["user"]["extra"]["authentication.kubernetes.io/pod-name"] == ["rosetctl-node-abc"]

    expired = kube.issue("rosetctl", "rosetctl-node", [AUDIENCE], node="node-a", lifetime=-1)
    for token, audiences, why in ((expired, [AUDIENCE], "expired"), ("unknown", [AUDIENCE], "invalid"),
                                  (good, ["vault"], "audiences")):
        code, answer = post(kube, review(token, audiences), bearer=caller)
        assert code == 201 and "authenticated" not in answer["status"] and answer["status"]["user"] == {}
        assert why in answer["status"]["error"]
    # No audiences asked: the API server's own, which a token for the enrollment audience is not for.
    code, answer = post(kube, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                               "spec": {"token": good}}, bearer=caller)
    assert "authenticated" not in answer["status"]
