"""Alembic migrations of the service's own tables."""
