-- Runs once, when the postgres volume is first initialised (docker-entrypoint-initdb.d).
-- POSTGRES_DB (tuner) holds the service's store; MLflow gets its own database because both
-- keep an `alembic_version` table.
CREATE DATABASE mlflow;
