"""The liveness step: a NodeClaim stuck in a step past that step's timeout is replaced (Karpenter's
`lifecycle/liveness.go`): deleted with the reason on the claim and its pool, so its pods are solved
again.

- Not launched `launch_timeout` after its launch started: `LaunchFailed`.
- Launched, no Node registered `registration_timeout` after: `Unregistered` (a gang's whole launch group
  goes together: `gang_launch.unregistered`).
- Registered, asking for extended resources (GPUs, MIG slices...) and not initialized
  `initialization_timeout` after: `NotInitialized`, saying what was missing. Karpenter has none; broken
  GPU nodes would otherwise sit forever.

Karpenter runs liveness after the other steps on the claim they updated in memory; here every step sees
the claim of the pass's snapshot, so liveness runs first: a claim past its deadline is replaced before
another step acts on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from provisioner.api import NodeClaim
from provisioner.api.nodeclaim import LAUNCHED, REGISTERED
from provisioner.controllers.conditions import condition_status, condition_time
from provisioner.controllers.lifecycle.initialization import missing, pending
from provisioner.controllers.lifecycle.step import Pass, Step, extended_resources


@dataclass(kw_only=True, eq=False)
class Liveness(Step):
    def reconcile(self, claim: NodeClaim, p: Pass) -> bool:
        node, now, timeouts = p.node_of(claim), p.now, self.settings
        if not claim.status.provider_id:
            started = condition_time(claim, LAUNCHED)
            if started is None or now - started < timeouts.launch_timeout:
                return False
            self.replace(
                claim,
                reason="LaunchFailed",
                message=f"not launched within {timeouts.launch_timeout}; its pods will be provisioned again",
            )
            return True
        if condition_status(claim, REGISTERED) != "True":
            launched_at = condition_time(claim, LAUNCHED) or now
            if node is not None or now - launched_at < timeouts.registration_timeout:
                return False
            self.replace(
                claim,
                reason="Unregistered",
                message=(
                    f"no Node registered for {claim.status.provider_id} within "
                    f"{timeouts.registration_timeout}; replacing it"
                ),
            )
            return True
        if node is None or not pending(claim) or not extended_resources(claim.spec.resources.requests):
            return False
        registered_at = condition_time(claim, REGISTERED) or now
        if now - registered_at < timeouts.initialization_timeout:
            return False
        lacking = missing(claim, node)
        if not lacking:
            return False
        self.replace(
            claim,
            reason="NotInitialized",
            message=(
                f"Node {node.name} not initialized {timeouts.initialization_timeout} after registering ("
                + "; ".join(lacking)
                + "); replacing it"
            ),
        )
        return True
