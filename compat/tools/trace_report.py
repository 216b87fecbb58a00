"""``compat trace DIR``: read every rank's flight-recorder dump (compat.core.recorder) and say
where the
ranks parted: the first call on a group that some ranks never reached, or that the ranks made
differently, or that did not complete; with each rank's last calls side by side. The dumps are
torch's format, so dumps torch itself wrote are read too (without compat's fields)."""

from __future__ import annotations

import json
import os
import pickle
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TextIO

#: How many of each rank's last calls the side-by-side view shows.
LAST_CALLS = 6
_RANK_FILE = re.compile(r"(?:^|_)(\d+)$")


@dataclass
class Finding:
    """What the dumps say: ``kind`` is "missing" (ranks never reached the call), "diverged"
    (the ranks made different calls), "unfinished" (every rank made it; some did not finish),
    or "agree"."""

    kind: str
    group: str = ""
    seq: int = 0
    culprits: list[int] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def load(directory: str) -> dict[int, dict[str, Any]]:
    """Every rank's dump in ``directory`` (files named like ``rank_<N>``), by rank."""
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"DIR: no folder {directory!r}")
    dumps: dict[int, dict[str, Any]] = {}
    for name in sorted(os.listdir(directory)):
        match = _RANK_FILE.search(name)
        if match is None or name.endswith(".tmp"):
            continue
        with open(os.path.join(directory, name), "rb") as file:
            data = pickle.load(file)
        if not isinstance(data, dict) or "entries" not in data:
            continue
        rank = data.get("compat", {}).get("rank", int(match.group(1)))
        dumps[int(rank)] = data
    if not dumps:
        raise FileNotFoundError(f"DIR: no flight-recorder dump (rank_<N>) in {directory!r}")
    return dumps


def describe(entry: dict[str, Any]) -> str:
    """One call in a few words: ``#3 all_reduce float32 [4] started``."""
    op = entry.get("compat_op") or entry["profiling_name"].split(":", 1)[-1]
    sizes = entry["input_sizes"] or entry["output_sizes"]
    dtype = (entry.get("dtype") or ",".join(entry.get("input_dtypes") or [])) if sizes else ""
    shape = " ".join(str(list(size)) for size in sizes[:2]) + (" ..." if len(sizes) > 2 else "")
    seq = entry["p2p_seq_id"] if entry.get("is_p2p") else entry["collective_seq_id"]
    state = entry["state"]
    if entry.get("error"):
        state = entry["error"].split(":", 1)[0]
    peer = ""
    if entry.get("is_p2p"):
        peer = " " + entry["profiling_name"].split(" ", 1)[-1]
    return " ".join(part for part in (f"#{seq} {op}{peer}", dtype, shape, state) if part)


def _signature(entry: dict[str, Any]) -> tuple[Any, ...]:
    """What every rank of a collective must agree on: the op, the dtype, the sizes each rank
    gives alike (not a root's list, nor all_to_all's per-peer parts)."""
    op = entry.get("compat_op") or entry["profiling_name"].split(":", 1)[-1]
    if op in ("scatter", "scatter_tensor"):
        sizes: Any = entry["output_sizes"]
    elif op.startswith("all_to_all"):
        sizes = [list(size[1:]) for size in entry["input_sizes"][:1]]
    else:
        sizes = entry["input_sizes"]
    dtype = entry.get("dtype") or tuple(entry.get("input_dtypes") or ())
    return (op, dtype, str(sizes))


def analyse(dumps: dict[int, dict[str, Any]]) -> list[Finding]:
    """The first place the ranks part, per group (empty where they agree)."""
    world = max(int(d.get("compat", {}).get("world_size", 0)) for d in dumps.values())
    world = max(world, max(dumps) + 1)
    findings = []
    for name, ranks in sorted(_groups(dumps, world).items()):
        found = _group_finding(dumps, name, ranks)
        if found is not None:
            findings.append(found)
    silent = sorted(set(range(world)) - set(dumps))
    if silent:
        findings.insert(0, _silent_finding(dumps, silent))
    return findings


def _groups(dumps: dict[int, dict[str, Any]], world: int) -> dict[str, list[int]]:
    """Every group the dumps name, with its ranks."""
    groups: dict[str, list[int]] = {}
    for dump in dumps.values():
        for name, config in dump["pg_config"].items():
            ranks = config["ranks"]
            groups[name] = json.loads(ranks) if isinstance(ranks, str) else list(ranks)
        # torch's own dumps can name a group in their entries that pg_config keys otherwise
        for entry in dump["entries"]:
            groups.setdefault(entry["process_group"][0], list(range(world)))
    return groups


def _silent_finding(dumps: dict[int, dict[str, Any]], silent: list[int]) -> Finding:
    """The ranks that left no dump, and which ranks found them gone, in which call."""
    lines = [
        f"rank {', '.join(map(str, silent))} left no dump: its process ended without "
        "writing one (killed, or it ended before the others failed)"
    ]
    for rank, dump in sorted(dumps.items()):
        reason = str(dump.get("compat", {}).get("reason", ""))
        named = [r for r in silent if re.search(rf"\brank {r}\b", reason)]
        if named and reason.startswith("PeerLostError"):
            waiting = [e for e in dump["entries"] if e["state"] != "completed"]
            call = f" in call {describe(waiting[-1]).rsplit(' ', 1)[0]}" if waiting else ""
            lines.append(
                f"  rank {rank} found rank {', '.join(map(str, named))} gone (PeerLostError){call}"
            )
    return Finding("silent", culprits=silent, lines=lines)


def _group_finding(
    dumps: dict[int, dict[str, Any]], group: str, ranks: list[int]
) -> Finding | None:
    present = [rank for rank in ranks if rank in dumps]
    calls: dict[int, dict[int, dict[str, Any]]] = {}
    for rank in present:
        calls[rank] = {
            entry["collective_seq_id"]: entry
            for entry in dumps[rank]["entries"]
            if entry["process_group"][0] == group and not entry.get("is_p2p")
        }
    reached = [rank for rank in present if calls[rank]]
    if not reached:
        return None
    # Calls before the oldest one every rank still holds are out of some rank's ring.
    start = max(min(calls[rank]) for rank in reached)
    end = max(max(calls[rank]) for rank in reached)
    unfinished: Finding | None = None
    for seq in range(start, end + 1):
        here = {rank: calls[rank][seq] for rank in present if seq in calls[rank]}
        away = [rank for rank in present if seq not in calls[rank]]
        first = next(iter(here.values()))
        if away:
            lines = [
                f"group {group} (ranks {ranks}): rank {', '.join(map(str, away))} never reached "
                f"call {describe(first).rsplit(' ', 1)[0]}",
                *(
                    f"  rank {rank}: {describe(entry)}{_where(entry)}"
                    for rank, entry in here.items()
                ),
            ]
            return Finding("missing", group, seq, away, lines)
        signatures = {rank: _signature(entry) for rank, entry in here.items()}
        if len(set(signatures.values())) > 1:
            counts = Counter(signatures.values())
            common, most = counts.most_common(1)[0]
            culprits = (
                [rank for rank, sig in signatures.items() if sig != common]
                if most > len(here) - most
                else sorted(here)
            )
            lines = [
                f"group {group} (ranks {ranks}): the ranks' calls #{seq} differ"
                + (f"; rank {', '.join(map(str, culprits))} made the odd one" if most > 1 else ""),
                *(
                    f"  rank {rank}: {describe(entry)}{_where(entry)}"
                    for rank, entry in here.items()
                ),
            ]
            return Finding("diverged", group, seq, culprits, lines)
        # "started": compat's call that never completed (or torch's running one); torch's Gloo
        # dumps leave every call "scheduled", so that state alone says nothing.
        stuck = [
            rank
            for rank, entry in here.items()
            if entry["state"] == "started" or entry.get("error")
        ]
        if stuck and unfinished is None:
            lines = [
                f"group {group} (ranks {ranks}): call "
                f"{describe(first).rsplit(' ', 1)[0]} did not complete on rank "
                f"{', '.join(map(str, stuck))}",
                *(
                    f"  rank {rank}: {describe(entry)}{_where(entry)}"
                    for rank, entry in here.items()
                ),
            ]
            unfinished = Finding("unfinished", group, seq, stuck, lines)
    return unfinished


def _key(entry: dict[str, Any]) -> tuple[str, bool, int]:
    """The same call on every rank: its group, kind and sequence id there."""
    p2p = bool(entry.get("is_p2p"))
    seq = entry["p2p_seq_id"] if p2p else entry["collective_seq_id"]
    return (entry["process_group"][0], p2p, seq)


def side_by_side(dumps: dict[int, dict[str, Any]], count: int = LAST_CALLS) -> list[str]:
    """Each rank's last ``count`` calls, one column a rank, a row a call (the same call of a
    group on the same row), the newest last."""
    last = {rank: dump["entries"][-count:] for rank, dump in sorted(dumps.items())}
    started: dict[tuple[str, bool, int], int] = {}
    for entries in last.values():
        for entry in entries:
            key = _key(entry)
            started[key] = min(started.get(key, entry["time_created_ns"]), entry["time_created_ns"])
    rows = sorted(started, key=lambda key: (started[key], key))
    cells = {
        rank: {_key(entry): describe(entry) for entry in entries} for rank, entries in last.items()
    }
    width = max([len(text) for column in cells.values() for text in column.values()] + [10]) + 2
    lines = ["".join(f"rank {rank}".ljust(width) for rank in cells).rstrip()]
    for key in rows:
        lines.append(
            "".join(column.get(key, "-").ljust(width) for column in cells.values()).rstrip()
        )
    return lines


def _where(entry: dict[str, Any]) -> str:
    """Where the call was made: its innermost frame, where the dump has one."""
    frames = entry.get("frames") or []
    if not frames:
        return ""
    frame = frames[0]
    return f" at {os.path.basename(frame['filename'])}:{frame['line']} ({frame['name']})"


def report(directory: str, out: TextIO) -> int:
    """Print what the dumps in ``directory`` say; 0 where they agree, 1 where they part."""
    dumps = load(directory)
    world = max(int(d.get("compat", {}).get("world_size", 0)) for d in dumps.values())
    out.write(
        f"compat trace: {len(dumps)} dump(s) in {directory} "
        f"(rank {', '.join(map(str, sorted(dumps)))} of {world or '?'})\n"
    )
    for rank, dump in sorted(dumps.items()):
        reason = dump.get("compat", {}).get("reason", "written by torch")
        where = _where({"frames": dump.get("compat", {}).get("stack") or []})
        out.write(f"  rank {rank}: {reason.splitlines()[0] if reason else ''}{where}\n")
    findings = analyse(dumps)
    if not findings:
        states = {entry["state"] for dump in dumps.values() for entry in dump["entries"]}
        done = ", and every call completed" if states <= {"completed"} else ""
        out.write(f"the dumps agree: every rank of every group made the same calls{done}\n")
    for finding in findings:
        for line in finding.lines:
            out.write(line + "\n")
    out.write("last calls (newest last; - : not made, or not in that rank's dump):\n")
    for line in side_by_side(dumps):
        out.write("  " + line + "\n")
    return 1 if findings else 0
