"""FinOps: the ledger of every disruption action, blocker and node-hour (`ledger.py`, SQLAlchemy, its
schema by Alembic in `migrations/`), the recorder that writes it without holding up a controller
(`recorder.py`, tenacity), the row values they exchange (`rows.py`, pure, with the money rules of one
action), the usage meter (`meter.py`, pure) and the report builders (`reports/`, pure; charts by Altair).

This package's `__init__` imports nothing, so the pure report builders never pull in SQLAlchemy.
"""
