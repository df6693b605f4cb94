"""The controllers: provisioning, lifecycle, termination, disruption, garbage collection, interruption
and NodePool status, each a `reconciler.Reconciler`, run in order by `manager.Manager`. They read only
`provisioner.state` (through snapshots) and write only through `provisioner.clusterapi.ClusterAPI` (a
real API server in `provisioner.kube`, or the in-memory adapter), take time from a
`provisioner.clock.Clock`, and leave every decision to pure code (`provisioner.scheduling`,
`provisioner.disruption`).

What they share, by what it owns: `conditions` (condition bookkeeping), `provider_set` (which cloud
serves a NodeClass kind, and what each pool can launch), `claims` (the NodeClaim a scheduler decision
becomes), `pod_events` (the pod-event times consolidation counts from), `settings` and `metrics`."""
