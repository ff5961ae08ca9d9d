"""The CPU (and torch's kernel level) a trial trained on, beside its node and device.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add trials.cpu (null for everything stored before)."""
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("cpu", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop it again."""
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("cpu")
