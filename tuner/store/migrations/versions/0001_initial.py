"""Initial schema: experiments, trials, metric_points.

Revision ID: 0001
Revises:
Create Date: 2026-05-20
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _utc() -> sa.DateTime:
    """A timezone-aware timestamp column type."""
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create the three tables and their indexes."""
    op.create_table(
        "experiments",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("warnings", sa.JSON(), nullable=False),
        sa.Column("job_id", sa.String(255), nullable=True),
        sa.Column("tune_path", sa.Text(), nullable=True),
        sa.Column("best", sa.JSON(), nullable=True),
        sa.Column("mlflow", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("stop_requested", sa.Boolean(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("started_at", _utc(), nullable=True),
        sa.Column("finished_at", _utc(), nullable=True),
        sa.Column("updated_at", _utc(), nullable=False),
    )
    op.create_index("ix_experiments_status_created_at", "experiments", ["status", "created_at"])
    op.create_index("ix_experiments_created_at", "experiments", ["created_at"])
    op.create_table(
        "trials",
        sa.Column(
            "experiment_id",
            sa.String(32),
            sa.ForeignKey("experiments.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("trial_id", sa.String(255), primary_key=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=True),
        sa.Column("iterations", sa.Integer(), nullable=False),
        sa.Column("env_steps", sa.BigInteger(), nullable=False),
        sa.Column("metric", sa.Float(), nullable=True),
        sa.Column("best_metric", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("node_id", sa.String(255), nullable=True),
        sa.Column("node_ip", sa.String(64), nullable=True),
        sa.Column("device", sa.Text(), nullable=True),
        sa.Column("checkpoint", sa.Text(), nullable=True),
        sa.Column("mlflow_run_id", sa.String(64), nullable=True),
        sa.Column("updated_at", _utc(), nullable=False),
    )
    op.create_table(
        "metric_points",
        sa.Column(
            "experiment_id",
            sa.String(32),
            sa.ForeignKey("experiments.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("trial_id", sa.String(255), primary_key=True),
        sa.Column("iteration", sa.Integer(), primary_key=True),
        sa.Column("env_steps", sa.BigInteger(), nullable=False),
        sa.Column("time_s", sa.Float(), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
    )


def downgrade() -> None:
    """Drop everything revision 0001 created."""
    op.drop_table("metric_points")
    op.drop_table("trials")
    op.drop_index("ix_experiments_created_at", table_name="experiments")
    op.drop_index("ix_experiments_status_created_at", table_name="experiments")
    op.drop_table("experiments")
