"""Alembic migrations of the tuner store (env.py, versions/)."""
