"""Alembic revisions of the tuner store, oldest first."""
