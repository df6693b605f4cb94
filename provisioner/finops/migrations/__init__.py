"""Alembic's script directory for the FinOps ledger: `env.py` and one module per revision in `versions/`.

Revisions 0001 to 0003 are the steps the ledger had before Alembic (its own `schema_version` table), so a
ledger of that time is stamped with the matching revision and upgraded from there. Append revisions;
never edit one that has shipped.
"""
