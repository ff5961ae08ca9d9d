"""Trial retries: how many times Tune restarted a trial after a failure (max_failures).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add trials.retries (0 for every trial stored before)."""
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("retries", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    """Drop it again."""
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("retries")
