"""Training logger: TensorBoard (rsl_rl v5 tags), live console progress, CSV and a curve PNG."""

from __future__ import annotations

import csv
import logging
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ctrl_rl import distributed
from ctrl_rl.utils.files import atomic_write
from ctrl_rl.utils.profiling import split_text

LOSS_TAGS = {"value": "Loss/value", "surrogate": "Loss/surrogate", "entropy": "Loss/entropy",
             "learning_rate": "Loss/learning_rate", "mean_std": "Policy/mean_std",
             "approx_kl": "Policy/approx_kl", "clip_fraction": "Policy/clip_fraction",
             "explained_variance": "Policy/explained_variance", "smoothness_coef": "Policy/smoothness_coef"}
"""Learner stat -> TensorBoard tag; stats not listed go to ``Loss/<name>``."""


class LossWatch:
    """Reports a loss that explodes without (yet) being NaN: ``|loss|`` above ``factor`` times the
    median magnitude of its last ``window`` values and above ``floor``. A warning, once per onset:
    a critic loss of 1e30 is as dead a run as a NaN, and deserves to be seen before it becomes one."""

    def __init__(self, window: int = 20, factor: float = 1e3, floor: float = 1e3) -> None:
        self.window, self.factor, self.floor = window, factor, floor
        self.recent: dict[str, list[float]] = {}
        self.exploding: set[str] = set()

    def check(self, it: int, stats: dict[str, float]) -> list[str]:
        """The warnings this iteration's stats raise (also logged)."""
        out = []
        for key, v in stats.items():
            if not LOSS_TAGS.get(key, f"Loss/{key}").startswith("Loss/") or key == "learning_rate":
                continue
            past = self.recent.setdefault(key, [])
            mag = abs(v)
            if len(past) >= 3 and mag > self.floor and mag > self.factor * max(float(np.median(past)), 1e-12):
                if key not in self.exploding:
                    msg = (f"Loss/{key} exploded at iteration {it}: {v:.3g} (median of the previous {len(past)}: "
                           f"{np.median(past):.3g}); lower algo.learning_rate or check the rewards' scale")
                    logging.getLogger(__name__).warning(msg)
                    out.append(msg)
                    self.exploding.add(key)
                continue  # an exploded value does not become the new normal
            self.exploding.discard(key)
            past.append(mag)
            del past[:-self.window]
        return out


def format_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}"


def eta_seconds(durations: list[float], remaining: int, window: int = 10) -> float | None:
    """Seconds left at the pace of recent iterations: ``remaining`` times the median of the last
    ``window`` iteration durations. The first iteration (allocation, compilation, the first resets)
    is left out once another is known, and a median ignores the odd slow one (a checkpoint write),
    so a warm-up does not stretch the estimate over the whole run. None before any iteration."""
    if not durations:
        return None
    recent = sorted((durations[1:] if len(durations) > 1 else durations)[-window:])
    middle = len(recent) // 2
    median = recent[middle] if len(recent) % 2 else (recent[middle - 1] + recent[middle]) / 2
    return median * max(remaining, 0)


class EpisodeStats:
    """Accumulates finished-episode returns/lengths, the per-step ``info["log"]`` terms and the
    per-episode ``info["episode_metrics"]`` (a task's success) on the env's device (no per-step sync)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.reset()

    def reset(self) -> None:
        z = torch.zeros((), device=self.device, dtype=torch.float64)
        self.ret_sum, self.len_sum, self.count = z.clone(), z.clone(), z.clone()
        self.log_sums: dict[str, torch.Tensor] = {}
        self.log_steps = 0
        self.metric_sums: dict[str, torch.Tensor] = {}
        self.metric_counts: dict[str, torch.Tensor] = {}
        self._read: tuple[float | None, float | None, dict[str, float]] | None = None

    def add(self, terminated: torch.Tensor, truncated: torch.Tensor, info: dict[str, Any]) -> None:
        self._read = None
        done = terminated | truncated
        if "episode" in info:
            ep = info["episode"]
            self.ret_sum += torch.where(done, ep["return"], 0).sum()
            self.len_sum += torch.where(done, ep["length"], 0).sum()
            self.count += done.sum()
        for k, v in info.get("log", {}).items():
            v = torch.as_tensor(v, device=self.device, dtype=torch.float64).mean()
            self.log_sums[k] = self.log_sums.get(k, 0.0) + v
        self.log_steps += 1 if info.get("log") else 0
        for k, v in info.get("episode_metrics", {}).items():  # its value counts where an episode ended
            self.metric_sums[k] = self.metric_sums.get(k, 0.0) + torch.where(done, v.double(), 0.0).sum()
            self.metric_counts[k] = self.metric_counts.get(k, 0.0) + done.sum()

    def add_summary(self, mean_return: float, mean_length: float, count: int = 1,
                    metrics: dict[str, float] | None = None) -> None:
        """Episodes measured elsewhere (an offline learner's evaluation), as their means; ``metrics``: the means
        of their ``info["episode_metrics"]`` (logged as ``Metrics/<name>``, as training's episodes are)."""
        self._read = None
        self.ret_sum += mean_return * count
        self.len_sum += mean_length * count
        self.count += count
        for k, v in (metrics or {}).items():
            self.metric_sums[k] = self.metric_sums.get(k, 0.0) + v * count
            self.metric_counts[k] = self.metric_counts.get(k, 0.0) + count

    def read(self) -> tuple[float | None, float | None, dict[str, float]]:
        """``(mean_return, mean_length, log_means)`` over every rank's envs; ``None`` when no
        episode finished. ``log_means`` holds each term's mean per step and each episode metric's mean
        over the episodes that ended, as ``Metrics/<name>`` (Isaac Lab's section). One host read (and,
        under torchrun, one collective) per iteration: a second read before the next :meth:`add` returns the
        first's numbers."""
        if self._read is None:
            self._read = self._reduce()
        return self._read[0], self._read[1], dict(self._read[2])

    def _reduce(self) -> tuple[float | None, float | None, dict[str, float]]:
        keys, metrics = sorted(self.log_sums), sorted(self.metric_sums)
        local = torch.stack([self.ret_sum, self.len_sum, self.count, *(self.log_sums[k] for k in keys),
                             *(torch.as_tensor(self.metric_sums[k], dtype=torch.float64) for k in metrics),
                             *(torch.as_tensor(self.metric_counts[k], dtype=torch.float64) for k in metrics)]).tolist()
        ret_sum, len_sum, count, log_steps, *sums = distributed.sum_floats([*local[:3], self.log_steps, *local[3:]])
        k, m = len(keys), len(metrics)
        term_sums, metric_sums, ended = sums[:k], sums[k:k + m], sums[k + m:]
        logs = {k: v / max(1, log_steps) for k, v in zip(keys, term_sums, strict=True)}
        logs.update({f"Metrics/{k}": v / n for k, v, n in zip(metrics, metric_sums, ended, strict=True) if n > 0})
        if count == 0:
            return None, None, logs
        return ret_sum / count, len_sum / count, logs


class TrainLogger:
    """Writes one iteration's numbers to TensorBoard, the console and the run history."""

    def __init__(self, log_dir: Path | None, total_iterations: int, steps_per_iteration: int,
                 start_iteration: int = 0, history: list[dict[str, float]] | None = None, progress: bool = True):
        self.log_dir = log_dir
        self.total_iterations = total_iterations
        self.steps_per_iteration = steps_per_iteration
        self.step_origin = 0
        """Iterations up to this one consumed no env steps (an offline phase before online training)."""
        self.extra_env_steps = 0
        """Env steps spent outside iterations (choosing among offline policies by evaluation)."""
        self.start_iteration = start_iteration
        self.history = list(history or [])
        self.loss_watch = LossWatch()
        self.progress = progress
        self.tty = sys.stdout.isatty()
        self._t0 = time.perf_counter()
        self._last_print = 0.0
        self._last_iteration_end = self._t0
        self.durations: list[float] = []
        """Seconds per iteration of this process, for the ETA."""
        self.last_reward: float | None = self.history[-1].get("mean_reward") if self.history else None
        self.last_length: float | None = self.history[-1].get("mean_episode_length") if self.history else None
        self.profile_text = ""
        self.episode_metrics: list[str] = []
        """The task's per-episode metrics (``Metrics/<name>``), shown on the progress line."""
        """The last iteration's time split (``profile=true``), shown with the progress line."""
        self.writer = None
        if log_dir is not None:
            from torch.utils.tensorboard import SummaryWriter

            # purge_step drops events a killed run wrote after its last checkpoint
            self.writer = SummaryWriter(str(log_dir), purge_step=start_iteration + 1 if start_iteration else None)

    def log_iteration(self, it: int, stats: dict[str, float], episodes: EpisodeStats,
                      collection_time: float, learning_time: float) -> None:
        """``it`` counts completed iterations (1-based), matching ``model_<it>.pt``."""
        self.loss_watch.check(it, stats)
        mean_ret, mean_len, term_logs = episodes.read()
        self.episode_metrics = sorted(f"Metrics/{k}" for k in episodes.metric_sums)
        if mean_ret is not None:
            self.last_reward, self.last_length = mean_ret, mean_len
        steps = self.steps_per_iteration if it > self.step_origin else 0
        fps = steps / max(collection_time + learning_time, 1e-9)
        row = {"iteration": it, "env_steps": self.env_steps(it), "fps": fps,
               "collection_time": collection_time, "learning_time": learning_time, **stats, **term_logs}
        if self.last_reward is not None:
            row["mean_reward"], row["mean_episode_length"] = self.last_reward, self.last_length
        self.history.append(row)
        if self.writer is not None:
            w = self.writer
            if self.last_reward is not None:
                w.add_scalar("Train/mean_reward", self.last_reward, it)
                w.add_scalar("Train/mean_episode_length", self.last_length, it)
            for k, v in stats.items():
                w.add_scalar(LOSS_TAGS.get(k, f"Loss/{k}"), v, it)
            for k, v in term_logs.items():  # rsl_rl's rule: keys with a "/" name their own section
                w.add_scalar(k if "/" in k else f"Episode/{k}", v, it)
            w.add_scalar("Perf/total_fps", fps, it)
            w.add_scalar("Perf/collection_time", collection_time, it)
            w.add_scalar("Perf/learning_time", learning_time, it)
        if self.progress:
            self._print_progress(it, fps)

    def log_profile(self, it: int, split: dict[str, float]) -> None:
        """``profile=true``: iteration ``it``'s seconds per stage (``Perf/time_<stage>``, metrics.csv)."""
        if self.history and self.history[-1].get("iteration") == it:
            self.history[-1].update({f"time_{k}": v for k, v in split.items()})
        if self.writer is not None:
            for k, v in split.items():
                self.writer.add_scalar(f"Perf/time_{k}", v, it)
        self.profile_text = split_text(split)

    def env_steps(self, it: int) -> int:
        """Env steps consumed once ``it`` iterations are done."""
        return max(it - self.step_origin, 0) * self.steps_per_iteration + self.extra_env_steps

    def _print_progress(self, it: int, fps: float) -> None:
        now = time.perf_counter()
        self.durations.append(now - self._last_iteration_end)
        self._last_iteration_end = now
        done = it - self.start_iteration
        final = it == self.total_iterations
        if not self.tty and not final and now - self._last_print < 5.0 and done != 1:
            return  # in logs/CI: a line every 5 s, not one per iteration
        self._last_print = now
        elapsed = now - self._t0
        eta = eta_seconds(self.durations, self.total_iterations - it)
        reward = "n/a" if self.last_reward is None else f"{self.last_reward:9.2f}"
        length = "n/a" if self.last_length is None else f"{self.last_length:6.1f}"
        width = 20
        filled = int(width * it / max(self.total_iterations, 1))
        bar = "#" * filled + "-" * (width - filled)
        line = (f"[{bar}] it {it}/{self.total_iterations} | {self.env_steps(it) / 1e6:7.2f}M steps | "
                f"{fps / 1e3:7.1f}k steps/s | reward {reward} | ep len {length} | "
                f"elapsed {format_duration(elapsed)} | ETA {'?' if eta is None else format_duration(eta)}")
        for k in self.episode_metrics:  # a task's success: what a manipulation run is watched for
            if k in self.history[-1]:
                line += f" | {k[len('Metrics/'):]} {self.history[-1][k]:.2f}"
        if self.profile_text:
            line += f"\n    time: {self.profile_text}" if not self.tty else f" | {self.profile_text}"
        if self.tty:
            sys.stdout.write("\r" + line + ("\n" if final else ""))
        else:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def flush(self) -> None:
        """Make everything logged so far durable (called with each checkpoint, so a killed
        run's TensorBoard history reaches exactly as far as its last checkpoint)."""
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        """Flush TensorBoard and write ``metrics.csv`` and ``learning_curve.png``."""
        if self.writer is not None:
            self.writer.flush()
            self.writer.close()
        if self.log_dir is None or not self.history:
            return
        keys = sorted({k for row in self.history for k in row})
        with atomic_write(self.log_dir / "metrics.csv") as tmp, open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(self.history)
        with atomic_write(self.log_dir / "learning_curve.png") as tmp:
            write_learning_curve(self.history, tmp)


def close_quietly(logger: TrainLogger) -> None:
    """Close ``logger`` while another error propagates: its own failure (a full disk) is logged."""
    try:
        logger.close()
    except Exception as e:  # noqa: BLE001
        logging.getLogger(__name__).warning("also could not write the logs: %s", e)


def write_learning_curve(history: list[dict[str, float]], path: Path) -> None:
    """Mean episode return against env steps (and throughput), as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in history if "mean_reward" in r]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    if rows:
        ax.plot([r["env_steps"] / 1e6 for r in rows], [r["mean_reward"] for r in rows], color="tab:blue")
    ax.set_xlabel("env steps (M)")
    ax.set_ylabel("mean episode return")
    ax.set_title("Learning curve")
    ax.grid(alpha=0.3)
    ax2.plot([r["env_steps"] / 1e6 for r in history], [r["fps"] / 1e3 for r in history], color="tab:orange")
    ax2.set_xlabel("env steps (M)")
    ax2.set_ylabel("k env-steps/s (incl. update)")
    ax2.set_title("Throughput")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)
