"""The test builders every test folder uses, one module per kind of object: `pools` (instance types,
offerings, NodePools, node classes), `pods` (pods, DaemonSets, PDBs), `nodes` (nodes, snapshots, nodes
with claims, NodeClaims), `solving` (run the scheduler with defaults), `rows` (FinOps ledger rows) and
`common` (the shared constants, `NOW`). Each builder takes keyword overrides so a test states only what
it is about (`node_pool(weight=10)`, `gpu_pod(gpus=8, gpu_name="h100")`); a folder whose tests share
other defaults wraps these with them (tests/unit/disruption/builders.py, testkit/controllers/world.py)
rather than writing its own."""
