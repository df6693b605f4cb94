"""A nodeSelector value written as null is the empty string, as the API server decodes it into a map of
strings: the pod is solved (no pool offers an empty value) instead of failing the solve."""

from provisioner.state.objects import Pod


def test_a_null_node_selector_value_is_the_empty_string() -> None:
    pod = Pod.from_dict(
        {
            "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"nodeSelector": {"provisioner.sh/gpu-name": None}, "containers": [{"name": "c"}]},
        }
    )
    assert pod.node_selector == {"provisioner.sh/gpu-name": ""}
