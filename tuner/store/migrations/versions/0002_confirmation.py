"""The confirmation stage (a sweep's confirmed configs, a trial's stage and score) and a
sweep's launch count (its Ray job ids).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add experiments.confirmation and .launches, trials.stage and trials.score."""
    with op.batch_alter_table("experiments") as batch:
        batch.add_column(sa.Column("confirmation", sa.JSON(none_as_null=True), nullable=True))
        batch.add_column(sa.Column("launches", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("stage", sa.String(16), nullable=False, server_default="search"))
        batch.add_column(sa.Column("score", sa.Float(), nullable=True))


def downgrade() -> None:
    """Drop them again."""
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("score")
        batch.drop_column("stage")
    with op.batch_alter_table("experiments") as batch:
        batch.drop_column("launches")
        batch.drop_column("confirmation")
