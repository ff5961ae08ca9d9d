"""Request bodies parsed and validated in a spawned worker process, with a deadline."""

from __future__ import annotations

import asyncio
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from tuner import validation
from tuner.api._procs import OneWorker


class Validator:
    """Parses and validates request bodies in one spawned worker process (RLlib loaded
    there, never here), with a deadline; a worker that hangs or dies is replaced."""

    def __init__(
        self,
        allowed_modules: list[str],
        max_trials: int | None = None,
        timeout_s: float = 120,
        max_asha_rungs: int | None = None,
        tracking_uri: str | None = None,
    ) -> None:
        self.allowed = allowed_modules
        self.tracking_uri = tracking_uri  # a warm start's earlier sweep is looked up there
        self.max_trials = max_trials
        self.max_asha_rungs = max_asha_rungs
        self.timeout_s = timeout_s
        self._worker = self._new()

    @staticmethod
    def _new() -> OneWorker:
        worker = OneWorker()
        worker.pool.submit(validation.warm_up)
        return worker

    async def check(
        self,
        raw: bytes,
        yaml_body: bool,
        nodes: list[dict[str, float]] | None = None,
        plan: bool = False,
        check_fit: bool = True,
    ) -> dict[str, Any]:
        """{"spec", "warnings"} or {"issues"}; never raises for a bad body. With `nodes`,
        a trial that fits none of them is an issue too. With `plan`: {"plan"} (the fit a
        part of the plan, not an issue) or {"issues"}."""
        checks = validation.Checks(
            allowed_modules=self.allowed,
            nodes=nodes,
            check_fit=check_fit,
            build_env=True,
            import_user_code=False,
            max_trials=self.max_trials,
            max_asha_rungs=self.max_asha_rungs,
            plan=plan,
            tracking_uri=self.tracking_uri,
        )
        future = None
        try:
            future = self._worker.pool.submit(validation.check_body, raw, yaml_body, checks)
            return await asyncio.wait_for(asyncio.wrap_future(future), self.timeout_s)
        except asyncio.CancelledError:
            if future is None or not future.cancelled():
                raise  # this request itself was cancelled (client gone, shutdown)
            # another request's timeout replaced the worker before this one ran
            return validation.one_issue("(spec)", "validation was interrupted; send the spec again")
        except (TimeoutError, BrokenProcessPool) as err:
            self.restart()
            why = "timed out" if isinstance(err, TimeoutError) else "crashed"
            return validation.one_issue(
                "(spec)", f"validation {why} (the env constructor or the body)"
            )

    def restart(self) -> None:
        """Kills the worker (its own process) and starts a fresh one."""
        self._worker.kill()
        self._worker = self._new()

    def close(self) -> None:
        """Stops the worker."""
        self._worker.kill()
