"""The only importer of `kubernetes`: the client (`client`), informers feeding ClusterState
(`informers`), leader election on a Lease (`leader`), and the ClusterAPI over the API server (`api`)."""
