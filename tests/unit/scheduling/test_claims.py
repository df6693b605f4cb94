"""The NodeClaim a scheduler decision becomes: what the provisioning controller writes."""

from providers.aws.model import AWSNodeClass
from provisioner.api import labels as wk
from provisioner.api.hashing import nodeclass_hash, nodepool_hash
from testkit.builders import gpu_pod, gpu_types, node_pool, pod, req, run

NODE_CLASS = AWSNodeClass.model_validate(
    {
        "metadata": {"name": "default"},
        "spec": {
            "subnetSelectorTerms": [{"tags": {"team": "ml"}}],
            "securityGroupSelectorTerms": [{"tags": {"team": "ml"}}],
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "role": "nodes",
        },
    }
)


def test_a_claim_carries_pool_label_finalizer_options_and_both_drift_hashes() -> None:
    pool = node_pool("gpu", taints=[{"key": wk.GPU_RESOURCE, "effect": "NoSchedule"}])
    tolerate = [{"key": wk.GPU_RESOURCE, "operator": "Exists"}]
    results = run([gpu_pod("train", gpus=8, tolerations=tolerate)], pool, gpu_types())

    claim = results.new_claims[0].to_nodeclaim("gpu-abc", node_class=NODE_CLASS)

    assert claim.metadata.labels[wk.NODEPOOL] == "gpu"
    assert wk.TERMINATION_FINALIZER in claim.metadata.finalizers
    assert claim.instance_type_options()[0] == results.new_claims[0].instance_type.name
    assert [t.key for t in claim.spec.taints] == [wk.GPU_RESOURCE]
    assert claim.metadata.annotations[wk.NODEPOOL_HASH] == nodepool_hash(pool)
    assert claim.metadata.annotations[wk.NODECLASS_HASH] == nodeclass_hash(NODE_CLASS)


def test_a_template_change_changes_the_pool_hash_and_a_requirement_change_does_not() -> None:
    base = node_pool("cpu", requirements=[req(wk.CAPACITY_TYPE, "In", "spot")])
    tainted = node_pool(
        "cpu",
        requirements=[req(wk.CAPACITY_TYPE, "In", "spot")],
        taints=[{"key": "x", "effect": "NoSchedule"}],
    )
    narrowed = node_pool("cpu", requirements=[req(wk.CAPACITY_TYPE, "In", "on-demand")])

    assert nodepool_hash(tainted) != nodepool_hash(base)
    # Requirements drift only the nodes that no longer satisfy them, checked label by label.
    assert nodepool_hash(narrowed) == nodepool_hash(base)


def test_without_a_node_class_only_the_pool_hash_is_stamped() -> None:
    claim = run([pod("web", cpu="1")]).new_claims[0].to_nodeclaim("default-abc")
    assert wk.NODEPOOL_HASH in claim.metadata.annotations
    assert wk.NODECLASS_HASH not in claim.metadata.annotations
