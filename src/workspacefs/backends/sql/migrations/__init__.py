"""Alembic migrations of the SQL backend's schema (applied on first use, or by ``migrate(url)``)."""
