"""Prometheus metrics of the controllers, on a registry of their own (so tests and the simulator can run
several managers in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.pending_pods = Gauge(
            "provisioner_pending_pods", "Pods waiting for capacity (unschedulable, not bound)", registry=r
        )
        self.batch_size = Histogram(
            "provisioner_batch_size",
            "Pods per provisioning batch",
            buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000),
            registry=r,
        )
        self.solve_seconds = Histogram(
            "provisioner_solve_seconds",
            "Time spent in the scheduler per batch",
            buckets=(0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
        self.nodeclaims = Gauge(
            "provisioner_nodeclaims", "NodeClaims by phase and pool", ["phase", "nodepool"], registry=r
        )
        self.nodeclaims_created = Counter(
            "provisioner_nodeclaims_created", "NodeClaims written", ["nodepool"], registry=r
        )
        self.nodeclaims_terminated = Counter(
            "provisioner_nodeclaims_terminated",
            "NodeClaims whose finalizer completed",
            ["nodepool"],
            registry=r,
        )
        self.nodeclaims_replaced = Counter(
            "provisioner_nodeclaims_replaced",
            "NodeClaims deleted by the lifecycle controller (timeouts, no capacity)",
            ["reason"],
            registry=r,
        )
        self.node_repairs = Counter(
            "provisioner_node_repairs",
            "Nodes replaced because a condition stayed unhealthy past its toleration (node repair)",
            ["nodepool", "condition"],
            registry=r,
        )
        self.launch_failures = Counter(
            "provisioner_launch_failures", "Failed launches by reason", ["reason"], registry=r
        )
        self.instances_collected = Counter(
            "provisioner_instances_collected", "Instances terminated by garbage collection", registry=r
        )
        self.nodeclaims_collected = Counter(
            "provisioner_nodeclaims_collected",
            "NodeClaims deleted because their instance is gone",
            registry=r,
        )
        self.nodes_collected = Counter(
            "provisioner_nodes_collected", "Nodes of ours deleted because no NodeClaim owns them", registry=r
        )
        self.evictions = Counter(
            "provisioner_evictions", "Eviction attempts by result", ["result"], registry=r
        )
        self.interruptions = Counter(
            "provisioner_interruptions", "Interruption events handled", ["kind"], registry=r
        )
        self.cost_per_hour = Gauge(
            "provisioner_cost_per_hour",
            "List price of running claims, $/h, by pool",
            ["nodepool"],
            registry=r,
        )
        self.pods_waiting_for_quota = Gauge(
            "provisioner_pods_waiting_for_quota",
            "Team pods behind the admission gate, by team",
            ["team"],
            registry=r,
        )
        self.pods_admitted = Counter(
            "provisioner_pods_admitted", "Team pods admitted, by team and how", ["team", "how"], registry=r
        )
        self.reclaims = Counter(
            "provisioner_reclaims", "Borrowed pods evicted for their owner, by result", ["result"], registry=r
        )
        self.leader = Gauge("provisioner_leader", "1 while this replica holds the leader lease", registry=r)
        self.reconcile_errors = Counter(
            "provisioner_reconcile_errors", "Reconcile steps that raised", ["controller"], registry=r
        )
        self.ledger_write_failures = Counter(
            "provisioner_ledger_write_failures",
            "Ledger writes that failed after their retries (the rows are kept and tried again)",
            ["table"],
            registry=r,
        )
        self.ledger_rows_dropped = Counter(
            "provisioner_ledger_rows_dropped",
            "Ledger rows dropped because too many were waiting for the database",
            ["table"],
            registry=r,
        )
        self.ledger_rows_pending = Gauge(
            "provisioner_ledger_rows_pending", "Ledger rows waiting to be written", registry=r
        )
