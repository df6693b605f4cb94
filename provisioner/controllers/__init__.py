"""The controllers: provisioning, lifecycle, termination, garbage collection, interruption and NodePool
status, run in order by `manager.Manager`. They read only `provisioner.state` and write only through the
`cluster.ClusterAPI` protocol (a real API server in `provisioner.kube`, or `memory.MemoryCluster`), take
time from a `provisioner.clock.Clock`, and leave every decision to pure code (`provisioner.scheduling`)."""
