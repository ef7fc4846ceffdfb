"""A run's Neuron profile files: NEFFs paired with NTFFs, runtime traces, orphans, empty files.

Every documented layout (docs/neuron.md) is found by searching the run's directory recursively:
``<instance>_pid_<pid>/<timestamp>/``, the same without the timestamp level, and loose files.
A NEFF and an NTFF belong together when the numeric hash in their names is identical
(``neff_395760075800974.neff`` and ``395760075800974_instid_0_vnc_0.ntff``). An NTFF named
without a hash (``profile_nc_0_session_0.ntff``) belongs to the NEFF of its own directory when
there is exactly one; otherwise it is reported as an orphan. Session-mode profiling need not be
1:1, so one NEFF may have several NTFFs; NTFFs of unused NeuronCores are empty and say so.

File names are never trusted: symbolic links are not followed and names are only matched, never
interpreted as paths beyond the directory they were found in.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

NEFF = re.compile(r"^neff_(\d+)(?:_vnc_\d+)?\.neff$")
NTFF_HASHED = re.compile(r"^(\d+)_instid_\d+_vnc_\d+\.ntff$")
RUNTIME_TRACES = ("trace_info.pb", "ntrace.pb", "cpu_util.pb", "host_mem.pb")
SYSTEM_PROFILE = ("trace_info.pb", "ntrace.pb")  # what `--ingest-only` needs


@dataclass
class File:
    path: Path
    size: int

    @property
    def empty(self) -> bool:
        return self.size == 0


@dataclass
class Pair:
    hash: str | None
    neff: File
    ntffs: list[File] = field(default_factory=list)


@dataclass
class Profile:
    root: Path
    pairs: list[Pair] = field(default_factory=list)
    orphan_neffs: list[File] = field(default_factory=list)
    orphan_ntffs: list[File] = field(default_factory=list)
    runtime: list[File] = field(default_factory=list)
    system_dirs: list[Path] = field(default_factory=list)  # have trace_info.pb + ntrace.pb

    @property
    def empty_ntffs(self) -> list[File]:
        every = [n for p in self.pairs for n in p.ntffs] + self.orphan_ntffs
        return [n for n in every if n.empty]

    @property
    def found(self) -> bool:
        return bool(self.pairs or self.orphan_neffs or self.orphan_ntffs or self.runtime)

    def downloads(self) -> list[Path]:
        """The NEFF/NTFF files worth offering for download (non-empty pairs first)."""
        paths: list[Path] = []
        for pair in self.pairs:
            ntffs = [n for n in pair.ntffs if not n.empty]
            if ntffs:
                paths.append(pair.neff.path)
                paths.extend(n.path for n in ntffs)
        return paths


def _walk(root: Path):
    for directory, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            path = Path(directory) / name
            try:
                if path.is_symlink() or not path.is_file():
                    continue
                size = path.stat().st_size
            except OSError:
                continue
            yield path, name, size


def find(root: str | Path) -> Profile:
    """Everything Neuron under ``root`` (a run's artifact directory); nothing found is fine."""
    root = Path(root)
    profile = Profile(root)
    if not root.is_dir():
        return profile
    neffs: dict[str, list[File]] = {}
    by_dir: dict[Path, list[File]] = {}
    hashed: list[tuple[str, File]] = []
    unhashed: list[File] = []
    traces: dict[Path, set[str]] = {}
    for path, name, size in _walk(root):
        found = File(path, size)
        if name.endswith(".neff"):
            match = NEFF.match(name)
            key = match.group(1) if match else f"?{path}"
            neffs.setdefault(key, []).append(found)
            by_dir.setdefault(path.parent, []).append(found)
        elif name.endswith(".ntff"):
            match = NTFF_HASHED.match(name)
            if match:
                hashed.append((match.group(1), found))
            else:
                unhashed.append(found)
        elif name in RUNTIME_TRACES:
            profile.runtime.append(found)
            traces.setdefault(path.parent, set()).add(name)
    pairs: dict[int, Pair] = {}  # id(neff File) -> pair
    for key, ntff in hashed:
        candidates = neffs.get(key)
        if not candidates:
            profile.orphan_ntffs.append(ntff)
            continue
        # the NEFF nearest the NTFF: same directory first
        neff = next((n for n in candidates if n.path.parent == ntff.path.parent), candidates[0])
        pairs.setdefault(id(neff), Pair(key, neff)).ntffs.append(ntff)
    for ntff in unhashed:
        local = by_dir.get(ntff.path.parent, [])
        if len(local) == 1:
            neff = local[0]
            key = next((k for k, v in neffs.items() if neff in v), None)
            pairs.setdefault(id(neff), Pair(_plain(key), neff)).ntffs.append(ntff)
        else:
            profile.orphan_ntffs.append(ntff)
    for _key, files in sorted(neffs.items()):
        for neff in files:
            if id(neff) in pairs:
                profile.pairs.append(pairs[id(neff)])
            else:
                profile.orphan_neffs.append(neff)
    profile.system_dirs = sorted(d for d, names in traces.items() if set(SYSTEM_PROFILE) <= names)
    return profile


def _plain(key: str | None) -> str | None:
    return None if key is None or key.startswith("?") else key


def size(n: int) -> str:
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{n} B"  # pragma: no cover


def summary_lines(profile: Profile, relative_to: Path | None = None) -> list[str]:
    """Markdown lines for a hover: each pair with sizes, orphans, empty NTFFs, runtime traces."""
    base = relative_to or profile.root

    def name(f: File) -> str:
        try:
            shown = f.path.relative_to(base).as_posix()
        except ValueError:
            shown = f.path.name
        return "`" + shown.replace("`", "'").replace("|", "\\|") + "`"

    def described(f: File) -> str:
        return f"{name(f)} ({size(f.size)}{', empty' if f.empty else ''})"

    lines: list[str] = []
    for pair in profile.pairs:
        ntffs = ", ".join(described(n) for n in pair.ntffs)
        lines.append(f"- NEFF {described(pair.neff)} ↔ NTFF {ntffs}")
    for neff in profile.orphan_neffs:
        lines.append(f"- NEFF {described(neff)}: no NTFF (orphan)")
    for ntff in profile.orphan_ntffs:
        lines.append(f"- NTFF {described(ntff)}: no NEFF with its hash (orphan)")
    if profile.runtime:
        traces = ", ".join(described(f) for f in profile.runtime)
        lines.append(f"- runtime trace: {traces}")
    empty = profile.empty_ntffs
    if empty:
        noun = "NTFF" if len(empty) == 1 else "NTFFs"
        lines.append(f"- {len(empty)} empty {noun}: NeuronCores this run did not use")
    return lines
