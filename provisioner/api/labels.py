"""Well-known label, annotation, taint and finalizer keys: the one place they are spelled.

Kubernetes' own topology and instance keys plus the `provisioner.sh/` keys of ../DESIGN.md. Everything
that reads or writes a label imports the constant from here.
"""

from __future__ import annotations

GROUP = "provisioner.sh"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"

# Kubernetes' own well-known labels.
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
HOSTNAME = "kubernetes.io/hostname"

# Ours.
NODEPOOL = f"{GROUP}/nodepool"
NODECLAIM = f"{GROUP}/nodeclaim"
CAPACITY_TYPE = f"{GROUP}/capacity-type"
INSTANCE_FAMILY = f"{GROUP}/instance-family"
INSTANCE_CPU = f"{GROUP}/instance-cpu"
INSTANCE_MEMORY = f"{GROUP}/instance-memory"
GPU_NAME = f"{GROUP}/gpu-name"
GPU_COUNT = f"{GROUP}/gpu-count"
GPU_MEMORY = f"{GROUP}/gpu-memory"
GPU_MANUFACTURER = f"{GROUP}/gpu-manufacturer"
CLUSTER = f"{GROUP}/cluster"
INITIALIZED = f"{GROUP}/initialized"
REGISTERED = f"{GROUP}/registered"
CAPACITY_RESERVATION_ID = f"{GROUP}/capacity-reservation-id"
"""On a node (and, on AWS, a tag of its instance) in a reservation: the reservation's id or name."""
CAPACITY_RESERVATION_TYPE = f"{GROUP}/capacity-reservation-type"
"""On a node in a reservation: `default` or `capacity-block` (a block ends at a fixed time)."""
GANG = f"{GROUP}/gang"
"""On an instance (tag or GCE label) launched by `create_group`, and on the placement group or policy
created for its gang: the gang's key."""
RESERVATION_TYPE_DEFAULT = "default"
RESERVATION_TYPE_CAPACITY_BLOCK = "capacity-block"

NODE_LABELS = (
    NODEPOOL,
    NODECLAIM,
    CAPACITY_TYPE,
    INSTANCE_FAMILY,
    INSTANCE_CPU,
    INSTANCE_MEMORY,
    GPU_NAME,
    GPU_COUNT,
    GPU_MEMORY,
    GPU_MANUFACTURER,
    CLUSTER,
    INITIALIZED,
    REGISTERED,
)
"""Every `provisioner.sh/` label a node can carry: another key under the prefix is probably a typo."""

# Annotations.
DO_NOT_DISRUPT = f"{GROUP}/do-not-disrupt"
NODEPOOLS = f"{GROUP}/nodepools"
TEAM = f"{GROUP}/team"
DEFAULT_POOL = f"{GROUP}/default-pool"
"""NodePool annotation: `"false"` keeps a pool named `default` from taking every pod that names no list,
so pods go to every pool by weight as under Karpenter (`templates import-karpenter` sets it)."""
PREEMPTIBLE = f"{GROUP}/preemptible"
"""Pod label: `"true"` lets the pod run over its team's quota (and be reclaimed)."""
NODEPOOL_HASH = f"{GROUP}/nodepool-hash"
NODECLASS_HASH = f"{GROUP}/nodeclass-hash"
PLANNED_OFFERING = f"{GROUP}/planned-offering"
"""On a NodeClaim: the offering the scheduler priced (`type/zone/capacity-type`), so the lifecycle
controller can say so when the launch had to fall back to another."""
DISRUPTION_REASON = f"{GROUP}/disruption-reason"
"""On a NodeClaim, written just before a deletion the controllers decide: why (`Interrupted`,
`Unregistered`, `Underutilized`...)."""
LEDGER_ACTIONS = f"{GROUP}/ledger-actions"
"""On a NodeClaim that disruption deletes: the FinOps ledger rows of its removal (JSON), written before
the deletion so a controller killed before the rows are stored finds them again; the termination
finalizer is held until they are stored (see provisioner.controllers.termination)."""

# Gangs: pods that run together or not at all.
KUEUE_POD_GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
"""Pod label (Kueue plain pod groups): the group the pod belongs to, within its namespace."""
KUEUE_POD_GROUP_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
"""Pod annotation (Kueue plain pod groups): how many pods the whole group has."""
CONSUME_PROVISIONING_REQUEST = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
"""Pod annotation: the ProvisioningRequest (same namespace) whose booked capacity the pod runs on (the
key Kueue writes; `autoscaling.x-k8s.io/consume-provisioning-request` is read too:
`provisioner.api.provisioning_request.CONSUME_ANNOTATIONS`)."""
PROVISIONING_REQUEST = f"{GROUP}/provisioning-request"
"""Label of the pods the provisioner makes of a ProvisioningRequest's PodTemplates to size its capacity:
the request's name. Such pods exist only inside solves, never in the cluster."""
GANG_SIZE = f"{GROUP}/gang-size"
"""On a NodeClaim of a gang (which also carries `GANG`, the gang's key): how many new claims the gang's
launch holds (the launcher waits for all of them)."""

# Taints and finalizers.
DISRUPTED_TAINT = f"{GROUP}/disrupted"
UNREGISTERED_TAINT = f"{GROUP}/unregistered"
TERMINATION_FINALIZER = f"{GROUP}/termination"
ADMISSION_GATE = f"{GROUP}/admission"
"""Scheduling gate on a team's pods until the controller admits them within quota."""

# Values.
CAPACITY_TYPE_SPOT = "spot"
CAPACITY_TYPE_ON_DEMAND = "on-demand"
CAPACITY_TYPE_RESERVED = "reserved"
CAPACITY_TYPES = (CAPACITY_TYPE_SPOT, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_RESERVED)

GPU_RESOURCE = "nvidia.com/gpu"
AMD_GPU_RESOURCE = "amd.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
"""EFA interfaces of an AWS node (the EFA device plugin's extended resource), requested like GPUs."""

# GPU model names as label values: lowercase, the same on every cloud.
GPU_NAMES = (
    "h100",
    "h200",
    "b200",
    "a100",
    "a10g",
    "l4",
    "l40s",
    "t4",
    "v100",
    "k80",
    "p100",
    "p4",
    "mi300x",
    "v520",
    "trainium",
    "trainium2",
    "inferentia2",
)
"""Accelerator models as `gpu-name` values; Neuron devices (`trainium`, `inferentia2`) are named the same
way, with `gpu-manufacturer: aws`."""

# Labels only the provisioner may set on a node: a template that sets them is refused.
RESTRICTED_LABELS = frozenset({NODEPOOL, NODECLAIM, INITIALIZED, REGISTERED, HOSTNAME})
