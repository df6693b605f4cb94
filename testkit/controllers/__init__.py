"""The Kubernetes side of the kit: the strict API server (kube_server, kube_rules, crd_schema) and the
controllers' world over it or over the in-memory adapter (world, standins)."""
