"""The Ray a sweep's driver process runs on: a local Ray of its own, or the cluster it
is given (`tuner run` starts it while RLlib is imported on a thread)."""

from __future__ import annotations

import os


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Connects to `address`, or starts a local Ray, unless Ray is already up.

    The working directory joins workers' PYTHONPATH so that envs named by import
    path ('mypkg.envs:MyEnv') import in every trial process. Call it from the main
    thread: Ray's processes end with the thread that started them (PR_SET_PDEATHSIG).
    """
    import ray

    if ray.is_initialized():
        return
    paths = [os.getcwd(), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    if address == "auto":  # a Ray Job's driver: the job's runtime_env already has PYTHONPATH
        ray.init(address=address, log_to_driver=False)
    elif address:
        ray.init(
            address=address,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}},
        )
    else:
        # "local": a new Ray of our own, even if another (say, a tuner serve head) runs here
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
