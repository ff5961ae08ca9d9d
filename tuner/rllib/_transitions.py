"""The flat replay path's buffer: one-step transitions in numpy arrays, sampled as RLlib's
`EpisodeReplayBuffer` (uniform) or `PrioritizedEpisodeReplayBuffer` samples, n-step
returns included (see _fast_replay.py for the path that uses it)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

_INITIAL_ROWS = 4096
# True: a uniform 1-step sample skips the n-step walk (the same rows and columns, 25
# instead of 37 us for 64 samples); False: every sample walks it (the tests' reference).
ONE_STEP_SAMPLES = True


class TransitionBuffer:
    """Replay of one-step transitions in numpy arrays, a ring of `capacity` rows (the
    oldest transitions are overwritten first). Arrays grow by doubling up to `capacity`,
    so memory follows what is stored. Each row links to its episode's next transition
    (across the chunks of an episode sampled in several rounds), for n-step returns.

    Uniform, or with `alpha` prioritized as RLlib's `PrioritizedEpisodeReplayBuffer`
    (Schaul et al. 2016): a transition is drawn with probability p^alpha / sum p^alpha,
    a new one gets the largest priority seen so far, `update_priorities` sets the last
    sample's priorities to its TD errors (at least 1e-12), and the importance weights are
    (N P(i))^-beta over their largest possible value, (N min P)^-beta.

    n-step as RLlib's two buffers do it: the reward is the discounted sum of the next n
    rewards, the next observation the one n steps on, terminated / truncated those of
    the n-th step, and the `n_step` column is n (a range `(lo, hi)` draws n per sample
    in [lo, hi)). Where fewer than n steps follow in the buffer, the uniform buffer
    shortens the sum (RLlib's `EpisodeReplayBuffer` slices to the episode's end, and then
    flags the sample neither terminated nor truncated) and the prioritized one draws
    again (RLlib's `PrioritizedEpisodeReplayBuffer` resamples)."""

    def __init__(self, capacity: int, seed: int | None = None, alpha: float | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        if alpha is not None and alpha < 0:
            raise ValueError(f"replay alpha must be >= 0, got {alpha}")
        self.capacity = int(capacity)
        self.alpha = alpha
        self._rng = np.random.default_rng(seed)
        self._cols: dict[str, np.ndarray] = {}
        self._gid = np.zeros(0, dtype=np.int64)  # each row's transition number (`added`)
        self._next_gid = np.zeros(0, dtype=np.int64)  # its episode's next one, -1 none yet
        self._open: dict[Any, int] = {}  # ongoing episode id -> its last stored transition
        self._priority = np.zeros(0)  # p^alpha per row (prioritized only)
        self._max_priority = 1.0
        self._last_rows = np.zeros(0, dtype=np.int64)
        self._size = 0
        self.added = 0  # transitions added over the buffer's life; row = number % capacity

    def __len__(self) -> int:
        return self._size

    def add(self, episodes: Iterable[Any]) -> int:
        """Adds every transition of the sampled episode chunks (`SingleAgentEpisode`s as
        the env runners return them: an ongoing episode's chunk ends in the observation
        its next chunk starts from). Returns the number added."""
        n = 0
        for episode in episodes:
            length = len(episode)
            if length == 0:
                continue
            obs = np.asarray(episode.get_observations())
            done = np.zeros(length, dtype=bool)
            terminated, truncated = done.copy(), done.copy()
            terminated[-1] = bool(episode.is_terminated)
            truncated[-1] = bool(episode.is_truncated)
            first = self._write(
                {
                    "obs": obs[:-1],
                    "new_obs": obs[1:],
                    "actions": np.asarray(episode.get_actions()),
                    "rewards": np.asarray(episode.get_rewards(), dtype=np.float32),
                    "terminateds": terminated,
                    "truncateds": truncated,
                }
            )
            before = self._open.pop(episode.id_, None)
            if before is not None and self._holds(before):
                self._next_gid[before % self.capacity] = first
            if not episode.is_done:
                self._open[episode.id_] = self.added - 1
            n += length
        if len(self._open) > 4 * _INITIAL_ROWS:  # episodes an env runner dropped
            self._open = {k: v for k, v in self._open.items() if self._holds(v)}
        return n

    def sample(
        self, n: int, beta: float = 0.0, n_step: int | tuple[int, int] = 1, gamma: float = 0.99
    ) -> dict[str, np.ndarray]:
        """`n` transitions drawn with replacement (as RLlib's buffers draw), n-step as
        RLlib's, with RLlib's `n_step` and `weights` (1.0 when uniform, else the
        importance weights) columns."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        one_step = not isinstance(n_step, list | tuple) and int(n_step) == 1
        if ONE_STEP_SAMPLES and self.alpha is None and one_step:
            return self._sample_one_step(n)
        if isinstance(n_step, list | tuple):
            steps = self._rng.integers(int(n_step[0]), int(n_step[1]), size=n)
        else:
            steps = np.full(n, int(n_step), dtype=np.int64)
        rows = self._draw(n)
        ends, reached = self._follow(rows, steps)
        if self.alpha is not None:  # RLlib's prioritized buffer draws a short one again
            for _ in range(64):
                short = reached < steps
                if not short.any():
                    break
                rows[short] = self._draw(int(short.sum()))
                ends[short], reached[short] = self._follow(rows[short], steps[short])
        weights = np.ones(n, dtype=np.float32)
        if self.alpha is not None and beta:
            priority = self._priority[: self._size]
            total = priority.sum()
            least = (priority.min() / total * self._size) ** -beta
            weights = ((priority[rows] / total * self._size) ** -beta / least).astype(np.float32)
        self._last_rows = rows
        cols = self._cols
        # RLlib's uniform buffer marks a shortened n-step as neither terminated nor
        # truncated, even where it ends on the episode's last step (SingleAgentEpisode.slice
        # keeps the episode's flags only for a slice that stops exactly at its end): kept,
        # so that this path trains exactly what RLlib's does.
        full = reached == steps
        return {
            "obs": cols["obs"][rows],
            "actions": cols["actions"][rows],
            "rewards": self._returns(rows, reached, gamma),
            "new_obs": cols["new_obs"][ends],
            "terminateds": cols["terminateds"][ends] & full,
            "truncateds": cols["truncateds"][ends] & full,
            "n_step": steps,
            "weights": weights,
        }

    def _sample_one_step(self, n: int) -> dict[str, np.ndarray]:
        """`sample` where it is uniform and 1-step (SAC's default; DQN where a spec sets
        `n_step: 1`, our preset's being 3): the same draw and columns, without the n-step
        walk (each sample ends on its own row)."""
        rows = self._draw(n)
        self._last_rows = rows
        cols = self._cols
        return {
            "obs": cols["obs"][rows],
            "actions": cols["actions"][rows],
            "rewards": cols["rewards"][rows].astype(np.float32, copy=False),
            "new_obs": cols["new_obs"][rows],
            "terminateds": cols["terminateds"][rows],
            "truncateds": cols["truncateds"][rows],
            "n_step": np.ones(n, dtype=np.int64),
            "weights": np.ones(n, dtype=np.float32),
        }

    def update_priorities(self, td_errors: np.ndarray) -> None:
        """The last sample's rows get their TD errors as priorities (prioritized only)."""
        if self.alpha is None:
            return
        td = np.maximum(np.abs(np.asarray(td_errors, dtype=np.float64).reshape(-1)), 1e-12)
        if len(td) != len(self._last_rows):
            raise ValueError(f"{len(td)} TD errors for a sample of {len(self._last_rows)}")
        self._priority[self._last_rows] = td**self.alpha
        self._max_priority = max(self._max_priority, float(td.max()))
        self._last_rows = np.zeros(0, dtype=np.int64)

    def _draw(self, n: int) -> np.ndarray:
        if self.alpha is None:
            return self._rng.integers(self._size, size=n)
        cumulative = np.cumsum(self._priority[: self._size])
        draws = self._rng.random(n) * cumulative[-1]
        return np.minimum(np.searchsorted(cumulative, draws, side="right"), self._size - 1)

    def _holds(self, gid: int | np.ndarray) -> Any:
        """Whether transition number `gid` is still stored (not overwritten)."""
        rows = np.asarray(gid) % self.capacity
        return (np.asarray(gid) >= 0) & (rows < self._size) & (self._gid[rows] == gid)

    def _follow(self, rows: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each start row, the row its n-step ends on and how many steps it spans
        (fewer than asked where the episode ends or its next steps are not stored)."""
        ends = rows.copy()
        reached = np.ones(len(rows), dtype=np.int64)
        going = steps > 1
        while going.any():
            nxt = self._next_gid[ends]
            done = self._cols["terminateds"][ends] | self._cols["truncateds"][ends]
            going &= (nxt >= 0) & ~done & (reached < steps)
            going &= self._holds(np.where(going, nxt, 0))
            ends = np.where(going, nxt % self.capacity, ends)
            reached += going
        return ends, reached

    def _returns(self, rows: np.ndarray, reached: np.ndarray, gamma: float) -> np.ndarray:
        """The discounted sum of each sample's `reached` rewards from its start row."""
        total = np.zeros(len(rows))
        at, discount = rows.copy(), 1.0
        for k in range(int(reached.max())):
            live = k < reached
            total += np.where(live, discount * self._cols["rewards"][at], 0.0)
            nxt = self._next_gid[at] % self.capacity
            at = np.where(live & (k + 1 < reached), nxt, at)
            discount *= gamma
        return total.astype(np.float32)

    def _write(self, cols: dict[str, np.ndarray]) -> int:
        """Writes one chunk's transitions; returns the first one's number."""
        n = len(cols["rewards"])
        if n > self.capacity:  # only the newest `capacity` survive anyway
            cols = {k: v[-self.capacity :] for k, v in cols.items()}
            n = self.capacity
        self._reserve(cols, self._size + n)
        first = self.added
        gids = first + np.arange(n)
        rows = gids % self.capacity
        for name, value in cols.items():
            self._cols[name][rows] = value
        self._gid[rows] = gids
        self._next_gid[rows] = gids + 1
        self._next_gid[rows[-1]] = -1  # the chunk's last: linked when the episode goes on
        if self.alpha is not None:
            self._priority[rows] = self._max_priority**self.alpha
        self._size = min(self._size + n, self.capacity)
        self.added += n
        return first

    def _reserve(self, cols: dict[str, np.ndarray], rows: int) -> None:
        have = len(self._gid)
        if have >= min(rows, self.capacity):
            return
        size = min(self.capacity, max(rows, 2 * have, _INITIAL_ROWS))

        def grow(old: np.ndarray, like: np.ndarray) -> np.ndarray:
            new = np.zeros((size, *like.shape[1:]), dtype=like.dtype)
            new[:have] = old[:have]
            return new

        for name, value in cols.items():
            self._cols[name] = grow(self._cols.get(name, value[:0]), value)
        self._gid = grow(self._gid, self._gid)
        self._next_gid = grow(self._next_gid, self._next_gid)
        if self.alpha is not None:
            self._priority = grow(self._priority, self._priority)
