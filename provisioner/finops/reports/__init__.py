"""Report building, pure: ledger rows (or a cluster snapshot) in, tables, CSV, JSON and HTML out.

`scale_down.build(...)` makes the scale-down report from action, blocker and usage rows; `nodes` makes
the node and node-pool status tables from a snapshot. Nothing here opens a database, reads the clock or
the environment: the CLI reads the ledger and passes rows and `now` in.
"""
