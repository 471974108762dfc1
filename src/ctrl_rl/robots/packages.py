"""Robot models that ship inside a Python package, used where they are, never copied here.

A robot YAML names such a model as ``mjcf: pkg:<distribution>==<version>/<path in the wheel>``, e.g.
``pkg:mjlab==1.6.0/mjlab/asset_zoo/robots/unitree_go1/xmls/go1.xml``. The wheel is fetched once, as a
set-up step (``ctrl-rl fetch-robots``, run by ``scripts/test.sh``): ``pip download --no-deps`` of that
exact version from the package index, then its robot files (MJCF and meshes, nothing else) are unpacked
into the cache. Nothing of the package is installed or imported: mjlab pins a MuJoCo older than this
project's, and its models are all that is needed. Nothing downloads at run time: a model not yet fetched
is an error that names the command.

Where: ``$CTRL_RL_CACHE`` or ``~/.cache/ctrl_rl``, under ``packages/<distribution>-<version>/``. An
installed distribution of the same version is used too (found without importing it).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

SCHEME = "pkg:"

PACKAGED = {"mjlab": ("1.6.0", ("mjlab/asset_zoo/robots/unitree_go1/xmls/", "mjlab/asset_zoo/robots/unitree_g1/xmls/",
                                "mjlab/asset_zoo/robots/i2rt_yam/xmls/"))}
"""Distribution -> (version, folders of the wheel unpacked into the cache). mjlab's wheel ships
Unitree's Go1 and G1 models (``robots/unitree_go1.yaml``, ``unitree_g1.yaml``) and i2rt's YAM arm
(``robots/i2rt_yam.yaml``)."""

_URI = re.compile(r"^pkg:(?P<dist>[A-Za-z0-9_.-]+)==(?P<version>[A-Za-z0-9_.+-]+)/(?P<path>.+)$")


class RobotModelNotFetched(FileNotFoundError):
    """A packaged robot model that is not on this machine yet (the message names the command)."""


@dataclass(frozen=True)
class PackagedFile:
    dist: str
    version: str
    path: str
    """Path inside the wheel, e.g. ``mjlab/asset_zoo/robots/unitree_go1/xmls/go1.xml``."""

    @classmethod
    def parse(cls, uri: str) -> PackagedFile:
        m = _URI.match(uri)
        if m is None:
            raise ValueError(f"mjcf {uri!r}: a packaged model is written pkg:<distribution>==<version>/<path in the "
                             "wheel>, e.g. pkg:mjlab==1.6.0/mjlab/asset_zoo/robots/unitree_go1/xmls/go1.xml")
        return cls(m["dist"], m["version"], m["path"])


def cache_root() -> Path:
    return Path(os.environ.get("CTRL_RL_CACHE") or Path.home() / ".cache" / "ctrl_rl")


def package_dir(dist: str, version: str) -> Path:
    """Where ``dist==version``'s robot files are unpacked."""
    return cache_root() / "packages" / f"{dist}-{version}"


def _installed(dist: str, version: str) -> Path | None:
    """The site folder of an installed ``dist`` of exactly ``version`` (not imported)."""
    try:
        found = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
    return Path(str(found.locate_file(""))) if found.version == version else None


def resolve(uri: str) -> Path:
    """The local file of a ``pkg:`` model: the cache first, then an installed distribution."""
    ref = PackagedFile.parse(uri)
    for root in (package_dir(ref.dist, ref.version), _installed(ref.dist, ref.version)):
        if root is not None and (root / ref.path).is_file():
            return root / ref.path
    raise RobotModelNotFetched(
        f"{ref.path} ships in the {ref.dist} {ref.version} wheel, which is not on this machine yet; fetch it once "
        f"with `ctrl-rl fetch-robots` (downloads {ref.dist}=={ref.version} without its dependencies from the package "
        f"index and unpacks its robot models into {package_dir(ref.dist, ref.version)})")


def fetch(dist: str, version: str | None = None, folders: tuple[str, ...] | None = None, quiet: bool = False) -> Path:
    """Download ``dist==version``'s wheel (no dependencies) and unpack ``folders`` of it into the cache."""
    known_version, known_folders = PACKAGED.get(dist, (None, ()))
    version = version or known_version
    folders = folders or known_folders
    if not version or not folders:
        raise ValueError(f"no packaged robot models known for {dist!r}; known: {sorted(PACKAGED)}")
    target = package_dir(dist, version)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", tmp,
               f"{dist}=={version}"]
        if not quiet:
            print(f"fetching {dist}=={version} (wheel only, no dependencies): {' '.join(cmd[2:])}", flush=True)
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise RuntimeError(f"pip could not download {dist}=={version}: {done.stderr.strip()[-400:]}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            members = [n for n in wheel.namelist() if n.startswith(folders) and not n.endswith("/")]
            wheel.extractall(target, members)
        size = sum(wheel_file.stat().st_size for wheel_file in target.rglob("*") if wheel_file.is_file())
    if not quiet:
        print(f"unpacked {len(members)} files ({size / 1e6:.1f} MB) of {wheels[0].name} into {target}", flush=True)
    return target
