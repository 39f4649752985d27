"""Where the gradebook lives: nbgrader's ``db_url``, SQLite by default or a shared PostgreSQL database.

nbgrader keeps its gradebook through SQLAlchemy, so the URL is SQLAlchemy's: ``sqlite:////abs/gradebook.db``
(nbgrader's default, in the course root) or ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE``
(driver: psycopg 3, SQLAlchemy's default for ``postgresql://``, from the ``classroom`` extra; a unix socket as ``postgresql://USER@/DATABASE?host=/run/dir``).
``check_db_url`` refuses anything else with a message that says what is wrong, before nbgrader
would fail deep inside SQLAlchemy.
"""

from __future__ import annotations

BACKENDS = ("sqlite", "postgresql")
EXAMPLE = "sqlite:////path/to/gradebook.db or postgresql://USER@HOST:5432/DATABASE"


def check_db_url(url: str) -> str:
    """``url`` when it is a gradebook URL this course can use (its driver installed); else a ``ValueError``."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"the gradebook URL (db_url) is empty: expected {EXAMPLE}")
    try:
        parsed = make_url(url.strip())
    except (ArgumentError, ValueError) as exc:
        raise ValueError(f"db_url {url!r} is not a database URL ({exc}): expected {EXAMPLE}") from None
    shown = parsed.render_as_string(hide_password=True)
    backend = parsed.get_backend_name()
    if backend not in BACKENDS:
        raise ValueError(f"db_url {shown!r}: the gradebook can be SQLite or PostgreSQL, not {backend!r} ({EXAMPLE})")
    if not parsed.database:
        raise ValueError(f"db_url {shown!r} names no database ({EXAMPLE})")
    try:
        parsed.get_dialect().import_dbapi()
    except ImportError as exc:
        raise ValueError(
            f"db_url {shown!r} needs the {parsed.drivername!r} database driver, which is not installed ({exc}); "
            f"install the course with its classroom extra: pip install -e '.[classroom]'"
        ) from None
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy names an unknown driver in several ways
        raise ValueError(f"db_url {shown!r}: unknown database driver {parsed.drivername!r} ({exc})") from None
    return url.strip()


def sqlite_path(url: str) -> str | None:
    """The file of a SQLite gradebook (what the sandbox must not see); None for a database server."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return parsed.database if parsed.get_backend_name() == "sqlite" else None
