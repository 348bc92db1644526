"""Program texts with names and metadata set aside, and the counts read from optimized HLO.

Two programs that differ only in what they are called, where their source lines are, or in the
numbering XLA gives its instructions normalise to the same text. What stays: every instruction,
its opcode, shapes and layouts, attributes such as fusion kinds and custom-call targets, and
the program's structure.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

_QUOTED = r'"(?:[^"\\]|\\.)*"'
_METADATA = re.compile(rf",?\s*metadata=\{{(?:[^{{}}\"]|{_QUOTED})*\}}")
_STACK_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_HLO_NAME = re.compile(r"%[\w.\-]+")
_SIGNATURE_PARAM = re.compile(r"([(,]\s*)[\w.\-]+: ")
_MLIR_NAME = re.compile(r"[%@][\w.\-$]+")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%[\w.\-]+\s*=\s*.+?\s([a-z][\w\-]*)\(")
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?(%[\w.\-]+)\s*\(.*\{\s*$")
_DEFINED = re.compile(r"^\s*(?:ROOT\s+)?(%[\w.\-]+)\s*=")


def _canonical(text: str, pattern: re.Pattern[str], prefix: str = "%") -> str:
    names: dict[str, str] = {}

    def rename(m: re.Match[str]) -> str:
        token = m.group()
        sigil = token[0] if token[0] in "%@" else prefix
        return names.setdefault(token, f"{sigil}{len(names)}")

    return pattern.sub(rename, text)


def _hlo_blocks(text: str) -> tuple[list[str], list[str | None], dict[str, list[str]]]:
    """Optimized HLO's lines without metadata, each line's computation, each one's lines.

    See :func:`normalize_hlo` for what is set aside.
    """
    lines, skipping = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in _STACK_SECTIONS:
            skipping = True
            continue
        if skipping:
            if stripped and not stripped.startswith(("%", "ENTRY")):
                continue
            skipping = False
        if line.startswith("HloModule "):
            line = re.sub(r"^HloModule [^,\s]+", "HloModule _", line)
        line = _METADATA.sub("", line)
        if _COMPUTATION.match(line):
            line = _SIGNATURE_PARAM.sub(r"\1", line)
        if line.strip():
            lines.append(line.rstrip())
    blocks: dict[str, list[str]] = {}
    owner: list[str | None] = []  # the computation of each line (None: module level)
    current = None
    for line in lines:
        if head := _COMPUTATION.match(line):
            current = head.group(1)
            blocks.setdefault(current, [])
        owner.append(current)
        if current is not None:
            blocks[current].append(line)
        if line.strip() == "}":
            current = None
    return lines, owner, blocks


def normalize_hlo(text: str) -> str:
    """Optimized HLO (``Compiled.as_text()``) without names, metadata or source locations.

    Drops the stack-frame tables newer XLA prints after the module line, every
    ``metadata={...}``, the module's name, and the parameter names of computation signatures.
    Instructions are renamed ``%0, %1, ...`` within each computation. A computation is named by
    its content, ``%c<8 hex digits>`` (a SHA-256 of its normalised text, in which the
    computations it calls have their content names), so a computation that XLA inserts or
    renumbers changes its own lines and the lines that call it, not every later name.
    """
    lines, owner, blocks = _hlo_blocks(text)
    renamed = _content_named(blocks).texts
    out, done = [], set()
    for line, computation in zip(lines, owner, strict=True):
        if computation is None:
            out.append(line)
        elif computation not in done:
            done.add(computation)
            out.extend(renamed[computation])
    return "\n".join(out)


def instruction_keys(text: str) -> dict[str, str]:
    """Each instruction of optimized HLO, by name, to its place in the normalised program.

    The place is ``<content name of its computation>/<its number there>`` (:func:`normalize_hlo`),
    so the same instruction of the same computation has the same place in two programs whatever
    XLA numbered it (``fusion.3`` in one, ``fusion.4`` in the other), and an instruction of a
    computation that changed has none in common. Names are without their ``%``, as the
    profiler's ops are named.
    """
    _, _, blocks = _hlo_blocks(text)
    named = _content_named(blocks)
    out: dict[str, str] = {}
    for computation, lines in blocks.items():
        local = named.locals[computation]
        for line in lines:
            if (head := _DEFINED.match(line)) and head.group(1) in local:
                out[head.group(1)[1:]] = f"{named.names[computation]}/{local[head.group(1)]}"
    return out


def programs_keys(programs: list[dict[str, Any]]) -> dict[str, str]:
    """:func:`instruction_keys` of every program of a case (each dict's optimized ``hlo``).

    A name two programs use for instructions at different places is left out (its ops are
    matched by name).
    """
    out: dict[str, str] = {}
    clashes: set[str] = set()
    for program in programs:
        for name, key in instruction_keys(program.get("hlo", "")).items():
            if out.setdefault(name, key) != key:
                clashes.add(name)
    return {name: key for name, key in out.items() if name not in clashes}


@dataclass(frozen=True)
class _Named:
    texts: dict[str, list[str]]  # each computation's lines, renamed
    names: dict[str, str]  # each computation's content name
    locals: dict[str, dict[str, str]]  # each computation's instruction names to their numbers


def _content_named(blocks: dict[str, list[str]]) -> _Named:
    """Each computation's lines, renamed, its content name, and its instructions' numbers.

    Instructions are numbered in order within their computation, and every computation (itself
    and those it calls) is named by the hash of its own text so renamed.
    """
    names: dict[str, str] = {}
    texts: dict[str, list[str]] = {}
    numbers: dict[str, dict[str, str]] = {}

    def name_of(computation: str) -> str:
        if computation in names:
            return names[computation]
        names[computation] = "%<self>"  # a call cycle (HLO has none) hashes as a self-reference
        local: dict[str, str] = {}

        def rename(m: re.Match[str]) -> str:
            token = m.group()
            if token == computation:
                return "%<self>"
            if token in blocks:
                return name_of(token)
            return local.setdefault(token, f"%{len(local)}")

        text = [_HLO_NAME.sub(rename, line) for line in blocks[computation]]
        names[computation] = "%c" + hashlib.sha256("\n".join(text).encode()).hexdigest()[:8]
        texts[computation] = [line.replace("%<self>", names[computation]) for line in text]
        numbers[computation] = local
        return names[computation]

    for computation in blocks:
        name_of(computation)
    return _Named(texts, names, numbers)


def normalize_stablehlo(text: str) -> str:
    """StableHLO (``Lowered.as_text()``) without module, function or value names, or locations."""
    text = re.sub(r"\s*loc\((?:[^()]|\([^()]*\))*\)", "", text)
    text = re.sub(r"^#loc.*$", "", text, flags=re.M)
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    return _canonical("\n".join(lines), _MLIR_NAME)


def normalize_jaxpr(text: str) -> str:
    """A jaxpr's text without the names of the functions it calls (``name=...``)."""
    return re.sub(r"\bname=[^\s\]]+", "name=_", text).strip()


NORMALIZERS = {"jaxpr": normalize_jaxpr, "stablehlo": normalize_stablehlo, "hlo": normalize_hlo}


#: XLA's collective opcodes (an asynchronous one is counted once, by its ``-start``).
COLLECTIVE_OPCODES = (
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
    "collective-broadcast",
)


def hlo_counts(text: str) -> dict[str, int]:
    """Counts read from optimized HLO text.

    Keys: ``instructions``; ``op:<opcode>`` per opcode; ``fusion:<kind>`` per fusion kind
    (``kLoop``, ``kInput``, ``kOutput``, ``kCustom``); ``custom-call:<target>``; ``copy``
    (instructions whose opcode is ``copy``, among them the copies of resharding);
    ``collectives`` (instructions of :data:`COLLECTIVE_OPCODES`, or their ``-start``); ``in
    while bodies`` (instructions of the computations named as a ``while``'s ``body=``, not
    counting what those call).
    """
    counts: Counter[str] = Counter()
    computation, members = None, {}
    bodies: set[str] = set()
    for line in text.splitlines():
        head = _COMPUTATION.match(line)
        if head:
            computation = head.group(1)
            members[computation] = 0
            continue
        inst = _INSTRUCTION.match(line)
        if not inst:
            continue
        opcode = inst.group(1)
        counts["instructions"] += 1
        counts[f"op:{opcode}"] += 1
        if computation is not None:
            members[computation] += 1
        if opcode == "copy":
            counts["copy"] += 1
        if opcode.removesuffix("-start") in COLLECTIVE_OPCODES:
            counts["collectives"] += 1
        if kind := re.search(r"\bkind=(k\w+)", line):
            counts[f"fusion:{kind.group(1)}"] += 1
        if target := re.search(r'custom_call_target="([^"]+)"', line):
            counts[f"custom-call:{target.group(1)}"] += 1
        if opcode == "while" and (body := re.search(r"\bbody=(%[\w.\-]+)", line)):
            bodies.add(body.group(1))
    counts["in while bodies"] = sum(members.get(b, 0) for b in bodies)
    return dict(counts)


def counted(program: dict[str, Any]) -> dict[str, int]:
    """:func:`hlo_counts` of a captured program's optimized HLO."""
    return hlo_counts(program.get("hlo", ""))
