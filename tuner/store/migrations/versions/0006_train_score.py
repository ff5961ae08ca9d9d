"""A trial's training metric under scope beside its score (the final deterministic
evaluation ranks trials by default).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add trials.train_score (null for everything stored before)."""
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("train_score", sa.Float(), nullable=True))


def downgrade() -> None:
    """Drop it again."""
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("train_score")
