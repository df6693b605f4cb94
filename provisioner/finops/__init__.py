"""FinOps: the ledger of every disruption action, blocker and node-hour (`ledger.py`, SQLAlchemy), the
row values they exchange (`rows.py`, pure) and the report builders (`reports/`, pure).

This package's `__init__` imports nothing, so the pure report builders never pull in SQLAlchemy.
"""
