"""Program texts with names and metadata set aside, and the counts read from optimized HLO.

Two programs that differ only in what they are called, where their source lines are, or in the
numbering XLA gives its instructions normalise to the same text. What stays: every instruction,
its opcode, shapes and layouts, attributes such as fusion kinds and custom-call targets, and
the program's structure.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

_QUOTED = r'"(?:[^"\\]|\\.)*"'
_METADATA = re.compile(rf",?\s*metadata=\{{(?:[^{{}}\"]|{_QUOTED})*\}}")
_STACK_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_HLO_NAME = re.compile(r"%[\w.\-]+")
_SIGNATURE_PARAM = re.compile(r"([(,]\s*)[\w.\-]+: ")
_MLIR_NAME = re.compile(r"[%@][\w.\-$]+")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%[\w.\-]+\s*=\s*.+?\s([a-z][\w\-]*)\(")
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?(%[\w.\-]+)\s*\(.*\{\s*$")


def _canonical(text: str, pattern: re.Pattern[str], prefix: str = "%") -> str:
    names: dict[str, str] = {}

    def rename(m: re.Match[str]) -> str:
        token = m.group()
        sigil = token[0] if token[0] in "%@" else prefix
        return names.setdefault(token, f"{sigil}{len(names)}")

    return pattern.sub(rename, text)


def normalize_hlo(text: str) -> str:
    """Optimized HLO (``Compiled.as_text()``) without names, metadata or source locations.

    Drops the stack-frame tables newer XLA prints after the module line, every
    ``metadata={...}``, the module's name, and the parameter names of computation signatures.
    Computations are renamed ``%c0, %c1, ...`` in order, and instructions ``%0, %1, ...``
    within each computation, so one inserted instruction changes its own computation's lines
    only.
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
    computations = {}
    for line in lines:
        if head := _COMPUTATION.match(line):
            computations.setdefault(head.group(1), f"%c{len(computations)}")
    local: dict[str, str] = {}

    def rename(m: re.Match[str]) -> str:
        token = m.group()
        return computations.get(token) or local.setdefault(token, f"%{len(local)}")

    out = []
    for line in lines:
        if _COMPUTATION.match(line):
            local = {}
        out.append(_HLO_NAME.sub(rename, line))
    return "\n".join(out)


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


def hlo_counts(text: str) -> dict[str, int]:
    """Counts read from optimized HLO text.

    Keys: ``instructions``; ``op:<opcode>`` per opcode; ``fusion:<kind>`` per fusion kind
    (``kLoop``, ``kInput``, ``kOutput``, ``kCustom``); ``custom-call:<target>``; ``copy``
    (instructions whose opcode is ``copy``); ``in while bodies`` (instructions of the
    computations named as a ``while``'s ``body=``, not counting what those call).
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
        if kind := re.search(r"\bkind=(k\w+)", line):
            counts[f"fusion:{kind.group(1)}"] += 1
        if target := re.search(r'custom_call_target="([^"]+)"', line):
            counts[f"custom-call:{target.group(1)}"] += 1
        if opcode == "while" and (body := re.search(r"\bbody=(%[\w.\-]+)", line)):
            bodies.add(body.group(1))
    counts["in while bodies"] = sum(members.get(b, 0) for b in bodies)
    return dict(counts)


def is_identical(level: str, a: str, b: str) -> bool:
    """Whether two texts of ``level`` (one of :data:`NORMALIZERS`) normalise to the same text."""
    normalize = NORMALIZERS[level]
    return normalize(a) == normalize(b)


def counted(program: dict[str, Any]) -> dict[str, int]:
    """:func:`hlo_counts` of a captured program's optimized HLO."""
    return hlo_counts(program.get("hlo", ""))
