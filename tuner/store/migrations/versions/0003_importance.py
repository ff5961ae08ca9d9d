"""Hyperparameter importance: a sweep's fANOVA and PED-ANOVA importance per sampled key.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add experiments.importance and experiments.importance_ped_anova."""
    with op.batch_alter_table("experiments") as batch:
        batch.add_column(sa.Column("importance", sa.JSON(none_as_null=True), nullable=True))
        batch.add_column(
            sa.Column("importance_ped_anova", sa.JSON(none_as_null=True), nullable=True)
        )


def downgrade() -> None:
    """Drop them again."""
    with op.batch_alter_table("experiments") as batch:
        batch.drop_column("importance_ped_anova")
        batch.drop_column("importance")
