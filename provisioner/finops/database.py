"""The ledger's database: where it is (`url_for`: a URL, a file, or the default SQLite file), an engine on
it, and its schema brought to the newest revision.

The schema is Alembic's: `provisioner/finops/migrations` holds the revisions, and `upgrade` runs
`alembic upgrade head` through Alembic's command API, so an old file or database upgrades in place. A
ledger written before Alembic (its own `schema_version` table, steps 1 to 3) is stamped with the matching
revision first, then upgraded; that table is kept, with a row that makes those older programs refuse the
upgraded ledger instead of writing to it.

On SQLite every transaction, schema changes included, is SQLite's own (`BEGIN` ... `COMMIT`): Python's
sqlite3 driver would otherwise commit each CREATE and ALTER at once, and a controller killed in the middle
of an upgrade would leave a half-made schema that no later open could upgrade ("table already exists").
The rows and their queries are `provisioner.finops.ledger`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Connection, Engine

DEFAULT_PATH = "provisioner-ledger.sqlite"
MIGRATIONS = Path(__file__).with_name("migrations")
"""Alembic's script directory (env.py and versions/)."""

LEGACY_REVISIONS = {1: "0001", 2: "0002", 3: "0003"}
"""The pre-Alembic `schema_version` steps and the revision each one equals."""

LOCK_KEY = 0x70726F76
"""PostgreSQL advisory lock held while migrating, so two replicas starting at once upgrade one at a time."""


def url_for(target: str | Path | None) -> str:
    """A SQLAlchemy URL from a URL, a file path, or None (the default SQLite file)."""
    if target is None:
        return f"sqlite:///{DEFAULT_PATH}"
    value = str(target)
    if "://" in value:
        if value.startswith("postgresql://"):
            # psycopg 3 is the driver we ship; SQLAlchemy's bare postgresql:// means psycopg2.
            return "postgresql+psycopg://" + value[len("postgresql://") :]
        return value
    return f"sqlite:///{value}"


class LedgerError(RuntimeError):
    """The ledger cannot be opened, or is newer than this program."""


def alembic_config(conn: Connection) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    return config


def _bridge_legacy(conn: Connection) -> None:
    """Stamp a pre-Alembic ledger with the revision its `schema_version` says it reached."""
    tables = set(inspect(conn).get_table_names())
    if "alembic_version" in tables or "schema_version" not in tables:
        return
    version = conn.execute(text("SELECT MAX(version) FROM schema_version")).scalar() or 0
    if version not in LEGACY_REVISIONS:
        raise LedgerError(f"ledger schema_version {version} is not one this program knows (1 to 3)")
    from alembic import command

    command.stamp(alembic_config(conn), LEGACY_REVISIONS[version])


def head_revision() -> str:
    """The newest revision this program ships."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None
    return head


def _transactional_sqlite(engine: Engine) -> None:
    """SQLAlchemy's recipe for SQLite transactions that hold DDL too: the driver begins nothing itself,
    and every SQLAlchemy transaction starts with an explicit BEGIN."""

    @event.listens_for(engine, "connect")
    def _driver_begins_nothing(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN")


def engine_for(url: str) -> Engine:
    """An engine on the database at `url`; on SQLite, one whose transactions hold schema changes too."""
    try:
        engine = create_engine(url)
    except Exception as err:  # bad URL or missing driver: say which
        raise LedgerError(f"cannot open ledger {url!r}: {err}") from err
    if engine.dialect.name == "sqlite":
        _transactional_sqlite(engine)
    return engine


def revision(engine: Engine) -> str | None:
    """The Alembic revision the database is at (None: not created yet)."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine) -> None:
    """Upgrade the schema to the newest revision (a new database gets every table)."""
    from alembic import command
    from alembic.util import CommandError

    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": LOCK_KEY})
        _bridge_legacy(conn)
        try:
            command.upgrade(alembic_config(conn), "head")
        except CommandError as err:
            # Alembic cannot find the database's revision among ours: a newer program wrote it.
            raise LedgerError(
                f"ledger {engine.url.render_as_string(hide_password=True)} is at a schema "
                f"revision this program does not know ({err}); it is newer than this program: "
                "upgrade the provisioner"
            ) from None
