"""RLlib's AlgorithmConfig's, Algorithm's and Catalog's private names: config keys, the
hooks our Algorithm and Catalog subclasses override, and the state they read."""

from __future__ import annotations

from typing import Any

# The sha256 of DQN._training_step_new_api_stack's source in the Ray the flat replay
# path was ported from (2.60): a Ray whose step changed fails its test until the port is
# checked again.
TRAINING_STEP_SOURCE = "09ec62b710932ad18e0fda0308c568560a33155fd61d9288d379bce2b44cfa11"


# --- AlgorithmConfig.to_dict() keys ------------------------------------------------------

MODEL_CONFIG_KEY = "_model_config"
RL_MODULE_SPEC_KEY = "_rl_module_spec"


def config_key(key: str, config: dict[str, Any]) -> str:
    """Where a config dict (AlgorithmConfig.to_dict()) keeps a setting: its own name, or
    the private name RLlib keeps a property under (`train_batch_size_per_learner` ->
    `_train_batch_size_per_learner`)."""
    if key not in config and f"_{key}" in config:
        return f"_{key}"
    return key


# --- AlgorithmConfig and Algorithm --------------------------------------------------------


def has_own_connectors(config: Any) -> bool:
    """Whether a config sets its own learner or env-to-module connector."""
    return config._learner_connector is not None or config._env_to_module_connector is not None


def module_is_stateful(algo: Any) -> bool:
    """Whether an Algorithm's RLModule is recurrent (True when RLlib did not say)."""
    return bool(getattr(algo, "_module_is_stateful", True))


class LocalReplayBufferHook:
    """Mixin for an Algorithm subclass: RLlib's private hook that builds the local
    replay buffer calls the subclass's `tuner_replay_buffer(config, rllib_default)`."""

    def _create_local_replay_buffer_if_necessary(self, config: Any) -> Any:
        return self.tuner_replay_buffer(  # type: ignore[attr-defined]
            config,
            super()._create_local_replay_buffer_if_necessary,  # type: ignore[misc]
        )


# --- the end of a training iteration --------------------------------------------------------


class IterationEndHook:
    """Mixin for an Algorithm: `tuner_iteration_end()` runs after a training iteration's
    last `training_step`, right before RLlib's private iteration loop (which its step
    runs with and without parallel evaluation) compiles the iteration's results."""

    def _run_one_training_iteration(self) -> Any:
        metrics = self.metrics  # type: ignore[attr-defined]
        compile_results = metrics.compile

        def compile_after_the_hook(*args: Any, **kwargs: Any) -> Any:
            self.tuner_iteration_end()  # type: ignore[attr-defined]
            return compile_results(*args, **kwargs)

        metrics.compile = compile_after_the_hook
        try:
            return super()._run_one_training_iteration()  # type: ignore[misc]
        finally:
            metrics.__dict__.pop("compile", None)


# --- SAC's catalog --------------------------------------------------------------------------


class QEncoderHook:
    """Mixin for a SACCatalog subclass: RLlib's private Q-encoder builder calls the
    subclass's `tuner_q_encoder(framework, rllib_default)`."""

    def _build_qf_encoder_continuous(self, framework: str) -> Any:
        return self.tuner_q_encoder(  # type: ignore[attr-defined]
            framework,
            super()._build_qf_encoder_continuous,  # type: ignore[misc]
        )


def catalog_model_config(catalog: Any) -> dict[str, Any]:
    """The model_config a Catalog was built with."""
    return catalog._model_config_dict
