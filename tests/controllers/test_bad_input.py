"""Bad objects in the cluster: the controller refuses them with an Event, launches nothing for them, and
keeps serving the rest."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from provisioner.api import labels as wk
from provisioner.kube.client import ApiError
from testkit.controllers.world import KubeBackend, World, gpu_pod, node_class, node_pool


@pytest.mark.parametrize(
    ("amount", "says"),
    [
        pytest.param("-1", "is negative", id="negative"),
        pytest.param("lots", "not a Kubernetes quantity", id="malformed"),
    ],
)
def test_a_pod_with_a_bad_gpu_request_gets_an_event_and_no_node(
    make_world: Callable[..., World], amount: str, says: str
) -> None:
    w = make_world()
    bad = gpu_pod("bad", gpu_name="a10g")
    bad["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", wk.GPU_RESOURCE: amount}}
    if isinstance(w.backend, KubeBackend):
        # An API server refuses such a pod at create (a real one and the strict imitation alike); the
        # controller's own check is for the in-memory cluster of `provisioner simulate`.
        with pytest.raises(ApiError) as err:
            w.apply(bad)
        assert err.value.status == 422 and wk.GPU_RESOURCE in str(err.value)
        return
    w.apply(node_class(), node_pool("gpu", gpu_names=("a10g",)), bad, gpu_pod("good", gpu_name="a10g"))
    w.run_until(lambda: any(p.name == "good" and p.node_name for p in w.pods()), max_ticks=30)
    for _ in range(5):
        w.tick()
    assert len(w.claims()) == 1, "one node, for the good pod"
    assert not [e for e in w.events("Nominated") if e["involvedObject"]["name"] == "bad"]
    events = [e for e in w.events("InvalidPod") if e["involvedObject"]["name"] == "bad"]
    assert len(events) == 1, events
    message = events[0]["message"]
    assert message.startswith("cannot provision for this pod: ")
    assert f"spec.containers[0].resources.requests.{wk.GPU_RESOURCE}" in message and says in message
