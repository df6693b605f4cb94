"""Pods the scheduler must refuse, clearly and without launching anything: malformed or negative requests.
Pod-level resources (`spec.resources`, Kubernetes 1.32+) are counted over the containers' sum."""

from __future__ import annotations

from provisioner.api import labels as wk
from provisioner.state.objects import Pod
from testkit.builders import gpu_pod, gpu_types, node_pool, pod, reasons_of, run


def with_requests(base: Pod, **requests: str) -> Pod:
    raw = dict(base.raw)
    spec = dict(raw["spec"])
    (container,) = spec["containers"]
    spec["containers"] = [
        {**container, "resources": {"requests": {**container["resources"]["requests"], **requests}}}
    ]
    return Pod.from_dict({**raw, "spec": spec})


def test_a_negative_gpu_request_is_unschedulable_with_the_reason_and_launches_nothing() -> None:
    bad = with_requests(gpu_pod("bad", gpus=1, gpu_name="l4"), **{wk.GPU_RESOURCE: "-1"})
    good = gpu_pod("good", gpus=1, gpu_name="l4")
    results = run([bad, good], node_pool("gpu"), gpu_types())
    assert [p.name for c in results.new_claims for p in c.pods] == ["good"]
    (reason,) = reasons_of(results, "bad").values()
    assert f"spec.containers[0].resources.requests.{wk.GPU_RESOURCE}: '-1' is negative" in reason


def test_a_negative_cpu_request_never_lands_on_existing_capacity_either() -> None:
    bad = with_requests(pod("bad"), cpu="-2")
    results = run([bad])
    assert not results.new_claims and not results.placements
    assert "negative" in reasons_of(results, "bad")[""]


def test_pod_level_resources_decide_the_size_of_the_node() -> None:
    doc = dict(pod("big-containers", cpu="12", memory="1Gi").raw)
    doc["spec"] = {**doc["spec"], "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}
    results = run([Pod.from_dict(doc)])
    (claim,) = results.new_claims
    # The containers ask for 12 cores together; the pod as a whole for one, so the smallest type fits.
    assert claim.instance_type.name == "m.large"
