"""``runner.keep_heap``: large CPU tensors come from the heap, not from fresh page-faulting mappings."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="a glibc setting")

CHILD = """
import ctypes, sys
import torch
from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.session import build_env
from ctrl_rl.runners import make_runner

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                               "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
cfg = load_train_config(["task=pendulum", "env.num_envs=8", "runner.progress=false", sys.argv[1]])
make_runner(build_env(cfg), cfg, None)
before = libc.mallinfo2().hblks
x = torch.ones(64 << 20 >> 2)  # 64 MiB, above glibc's largest mmap threshold
print("MAPPED", libc.mallinfo2().hblks - before, float(x.sum()))
"""


def _mapped_blocks(setting: str) -> int:
    out = subprocess.run([sys.executable, "-c", CHILD, setting], capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("MAPPED"))
    assert line.split()[2] == str(float(64 << 20 >> 2))
    return int(line.split()[1])


def test_a_cpu_runner_serves_large_tensors_from_the_heap():
    assert _mapped_blocks("runner.keep_heap=true") == 0
    assert _mapped_blocks("runner.keep_heap=false") == 1  # glibc's own behaviour: a fresh mapping


def test_keep_freed_memory_is_idempotent():
    from ctrl_rl.utils.heap import keep_freed_memory

    assert keep_freed_memory() and keep_freed_memory()
