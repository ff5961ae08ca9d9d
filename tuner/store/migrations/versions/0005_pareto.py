"""Several objectives: a sweep's Pareto front and each trial's value of every objective.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add experiments.pareto and trials.values (null for everything stored before: a
    sweep of one metric has neither)."""
    with op.batch_alter_table("experiments") as batch:
        batch.add_column(sa.Column("pareto", sa.JSON(none_as_null=True), nullable=True))
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("values", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    """Drop them again."""
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("values")
    with op.batch_alter_table("experiments") as batch:
        batch.drop_column("pareto")
