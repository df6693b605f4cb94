"""Lifecycle of a NodeClaim: Launched -> Registered -> Initialized, with a timeout on each step; one
module per step, as Karpenter splits it, run in order by `controller.LifecycleController`:

- `launch`: the claim gets an instance (`provider.create`; a gang's claims together through
  `gang_launch` and `provider.create_group`), options tried in order past InsufficientCapacity, other
  failures backed off.
- `registration`: the Node with the claim's provider id appeared; it gets the pool's labels and taints,
  the cloud's topology labels, and loses the unregistered taint.
- `initialization`: the Node is Ready, its start-up taints are gone and the extended resources the claim
  asked for (GPUs, MIG slices) are allocatable.
- `liveness`: a claim stuck past a step's timeout (`launch_timeout`, `registration_timeout`,
  `initialization_timeout` for GPU nodes) is replaced, with an Event; a gang's whole launch group goes
  together.
- `step`: what the steps share (the Step base, replacing a claim, the step conditions).

Ready (the root condition `kubectl get nodeclaims` shows): True once all three are, False when one
failed, Unknown while one is pending; Karpenter's semantics.
"""

from provisioner.controllers.lifecycle.controller import LifecycleController

__all__ = ["LifecycleController"]
