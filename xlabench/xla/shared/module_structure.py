"""The structure of printed HLO module text: computations, references, fingerprint, normalized names.

Pure text processing (no jaxlib), so it runs in compiler workers and in tests alike.

The fingerprint identifies a module up to renaming and reordering, and nothing more: two modules
get the same fingerprint only if they have the same instructions wired the same way -- including
*which* instructions and computations are shared. Each node (instruction or computation) gets two
hashes:

- a bottom-up Merkle hash: its own text with every `%reference` replaced by the hash of what it
  refers to (operand, control predecessor, called computation); a computation's hash covers the
  sorted hashes of its instructions and which is ROOT. This sees structure but not sharing: two
  clones of a computation hash alike, and so do a computation called from two sites and two
  copies each called once (what `flatten-call-graph` changes).
- a top-down context: who uses the node and in which operand position, with the users' own
  contexts -- for a computation, its call sites and their callers' contexts; for an instruction,
  its users within the computation. Sharing changes contexts.

The fingerprint is the sha256 of the entry layout and the sorted identities of all computations,
each identity combining the computation's Merkle hash, its context and the (hash, context) pairs of
its instructions.
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

# Bump when the fingerprint of some module changes meaning: caches keyed by fingerprints use it.
FINGERPRINT_VERSION = 2
# Bump when the canonical text a module is held in changes (the import in `analysis.describe`, the
# renaming and ordering here): cached transitions hold canonical text, so every key includes it.
NORMALIZATION_VERSION = 1

COMPUTATION_HEADER = re.compile(r"^(ENTRY )?%?([\w.\-]+) \(")
IDENTIFIER = re.compile(r"%([\w.\-]+)")
INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%([\w.\-]+)\s*=\s*(.*)$")
_COMPUTATION_REFERENCE = re.compile(
    r"\b(?:to_apply|body|condition|calls|true_computation|false_computation|select|scatter|comparator)="
    r"%?([\w.\-]+)"
)
_COMPUTATION_LISTS = re.compile(r"(?:branch_computations|called_computations)=\{([^}]*)\}")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def callees(instruction_text: str) -> list[str]:
    """Names of the computations an instruction's text calls (to_apply, body, branches, ...)."""
    names = _COMPUTATION_REFERENCE.findall(instruction_text)
    for group in _COMPUTATION_LISTS.findall(instruction_text):
        names.extend(name.strip().lstrip("%") for name in group.split(",") if name.strip())
    return names


def split_computations(text: str) -> tuple[list[str], list[list[str]]] | None:
    """Header lines and computation blocks (header line ... closing brace) of printed module text."""
    header: list[str] = []
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if current is None:
            if COMPUTATION_HEADER.match(line):
                current = [line]
            elif not blocks:
                header.append(line)
            continue
        current.append(line)
        if line.startswith("}"):
            blocks.append(current)
            current = None
    if current is not None or not blocks:
        return None
    return header, blocks


@contextmanager
def _deep_recursion() -> Iterator[None]:
    """Long dataflow chains recurse deeply in the Merkle hash."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 100_000))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


@dataclass
class ModuleStructure:
    """Hashes of every computation of printed module text (see the module docstring)."""

    entry: str
    merkle: dict[str, str] = field(default_factory=dict)  # computation -> bottom-up hash
    identity: dict[str, str] = field(default_factory=dict)  # computation -> hash with contexts
    callees: dict[str, set[str]] = field(default_factory=dict)  # computation -> computations it calls


def module_structure(blocks: list[list[str]]) -> ModuleStructure:
    """Merkle hashes, contexts and identities of the computations in `blocks`."""
    by_name = {COMPUTATION_HEADER.match(block[0]).group(2): block for block in blocks}
    entry = next(
        (COMPUTATION_HEADER.match(b[0]).group(2) for b in blocks if b[0].startswith("ENTRY")),
        next(iter(by_name)),
    )
    bodies: dict[str, dict[str, tuple[bool, str]]] = {}
    for name, block in by_name.items():
        instructions: dict[str, tuple[bool, str]] = {}
        for line in block[1:]:
            match = INSTRUCTION.match(line)
            if match:
                instructions[match.group(2)] = (bool(match.group(1)), match.group(3))
        bodies[name] = instructions

    structure = ModuleStructure(entry)
    instruction_hashes: dict[str, dict[str, str]] = {}
    completion_order: dict[str, list[str]] = {}
    # (user instruction, operand position, target) for every reference, per computation.
    references: dict[str, list[tuple[str, int, str]]] = {}

    def computation_hash(name: str, visiting: frozenset[str]) -> str:
        if name in structure.merkle:
            return structure.merkle[name]
        if name in visiting:
            return "cycle"
        instructions = bodies[name]
        memo: dict[str, str] = {}
        order: list[str] = []
        edges: list[tuple[str, int, str]] = []

        def instruction_hash(instruction: str) -> str:
            if instruction in memo:
                return memo[instruction]
            memo[instruction] = "pending"  # guards against malformed self-references
            position = 0

            def reference(found: re.Match[str]) -> str:
                nonlocal position
                target = found.group(1)
                if target in instructions:
                    edges.append((instruction, position, target))
                    position += 1
                    return "%" + instruction_hash(target)
                if target in by_name:
                    edges.append((instruction, position, target))
                    position += 1
                    return "%" + computation_hash(target, visiting | {name})
                return "%"

            body = IDENTIFIER.sub(reference, instructions[instruction][1])
            memo[instruction] = _digest(body)
            order.append(instruction)
            return memo[instruction]

        parts = sorted(
            ("ROOT " if is_root else "") + instruction_hash(instruction)
            for instruction, (is_root, _) in instructions.items()
        )
        structure.merkle[name] = _digest("\n".join(parts))
        instruction_hashes[name] = memo
        completion_order[name] = order
        references[name] = edges
        structure.callees[name] = {target for _, _, target in edges if target in by_name}
        return structure.merkle[name]

    with _deep_recursion():
        for name in by_name:
            computation_hash(name, frozenset())

    # Top-down: callers before callees (Kahn's algorithm on the call graph).
    call_sites: dict[str, list[tuple[str, str, int]]] = {name: [] for name in by_name}
    for caller, edges in references.items():
        for user, position, target in edges:
            if target in by_name:
                call_sites[target].append((caller, user, position))
    waiting = {name: len({caller for caller, _, _ in sites}) for name, sites in call_sites.items()}
    ready = sorted(name for name, count in waiting.items() if count == 0)
    context: dict[str, str] = {}
    instruction_context: dict[str, dict[str, str]] = {}
    done: list[str] = []
    while ready:
        name = ready.pop()
        done.append(name)
        if call_sites[name]:
            context[name] = _digest(
                "\n".join(
                    sorted(
                        f"{instruction_hashes[caller][user]}:{position}:"
                        f"{instruction_context[caller][user]}:{context[caller]}"
                        for caller, user, position in call_sites[name]
                    )
                )
            )
        else:
            context[name] = "ENTRY" if name == entry else "UNCALLED"
        instruction_context[name] = _instruction_contexts(
            bodies[name], instruction_hashes[name], completion_order[name], references[name]
        )
        for callee in sorted(structure.callees[name]):
            waiting[callee] -= 1
            if waiting[callee] == 0:
                ready.append(callee)
    for name in by_name:
        if name not in context:  # on a call cycle (not valid HLO): structure only
            context[name] = "cycle"
            instruction_context[name] = {}
        members = sorted(
            f"{instruction_hashes[name][instruction]}:{instruction_context[name].get(instruction, '')}"
            for instruction in bodies[name]
        )
        structure.identity[name] = _digest(
            f"{structure.merkle[name]}\n{context[name]}\n" + "\n".join(members)
        )
    return structure


def _instruction_contexts(
    instructions: dict[str, tuple[bool, str]],
    hashes: dict[str, str],
    operands_first: list[str],
    references: list[tuple[str, int, str]],
) -> dict[str, str]:
    """Each instruction's users (hash, operand position, their own context), users first."""
    users: dict[str, list[tuple[str, int]]] = {}
    for user, position, target in references:
        if target in instructions:
            users.setdefault(target, []).append((user, position))
    contexts: dict[str, str] = {}
    for instruction in reversed(operands_first):
        entries = sorted(
            f"{hashes[user]}:{position}:{contexts.get(user, '')}"
            for user, position in users.get(instruction, [])
        )
        root = "ROOT\n" if instructions[instruction][0] else ""
        contexts[instruction] = _digest(root + "\n".join(entries))
    return contexts


def structural_fingerprint(text: str) -> str:
    """sha256 of the module's structure, sharing included: independent of names and print order."""
    split = split_computations(text)
    if split is None:
        return hashlib.sha256(text.encode()).hexdigest()
    header, blocks = split
    return _fingerprint(header, module_structure(blocks))


def normalize_computations(text: str) -> str:
    """Give computations short stable names and a deterministic callee-first order.

    Every StableHLO round trip appends ".1" to computation names and reorders independent
    computations; this keeps module text from drifting as it goes through many passes.
    """
    split = split_computations(text)
    if split is None:
        return text  # not the layout XLA prints: leave it to the parser to complain
    header, blocks = split
    return _normalized(header, blocks, module_structure(blocks)) or text


def normalized_text_and_fingerprint(text: str) -> tuple[str, str]:
    """`normalize_computations(text)` and `structural_fingerprint(text)`, analysing the module once."""
    split = split_computations(text)
    if split is None:
        return text, hashlib.sha256(text.encode()).hexdigest()
    header, blocks = split
    structure = module_structure(blocks)
    return _normalized(header, blocks, structure) or text, _fingerprint(header, structure)


def _fingerprint(header: list[str], structure: ModuleStructure) -> str:
    layout = re.sub(r"^HloModule [^,\s]+", "HloModule", header[0]) if header else ""
    computations = sorted(structure.identity.values())
    return hashlib.sha256(
        f"v{FINGERPRINT_VERSION}\n{layout}\n{structure.identity[structure.entry]}\n".encode()
        + "\n".join(computations).encode()
    ).hexdigest()


def _normalized(header: list[str], blocks: list[list[str]], structure: ModuleStructure) -> str | None:
    """The renamed, reordered text; None when the call graph has a cycle (XLA cannot print one)."""
    names = [COMPUTATION_HEADER.match(block[0]).group(2) for block in blocks]
    entry = next(i for i, block in enumerate(blocks) if block[0].startswith("ENTRY"))
    # Kahn's algorithm: callees first, ties broken by structure (then old name), ENTRY last.
    placed: list[int] = []
    done: set[str] = set()
    pending = [i for i in range(len(blocks)) if i != entry]
    while pending:
        ready = [i for i in pending if structure.callees[names[i]] <= done]
        if not ready:
            return None
        chosen = min(ready, key=lambda i: (structure.identity[names[i]], names[i]))
        placed.append(chosen)
        done.add(names[chosen])
        pending.remove(chosen)
    placed.append(entry)
    renames = {}
    for position, index in enumerate(placed):
        base = re.sub(r"(?:\.\d+)+$", "", names[index])
        base = re.sub(r"_c\d+$", "", base) or "computation"
        renames[names[index]] = f"{base}_c{position}"

    def rename(match: re.Match[str]) -> str:
        return "%" + renames.get(match.group(1), match.group(1))

    out = list(header)
    for index in placed:
        out.extend(IDENTIFIER.sub(rename, line) for line in blocks[index])
        out.append("")
    return "\n".join(out)


_ALIAS_ENTRY = re.compile(r"\{[\d,\s]*\}:\s*\((\d+),")
_DONOR_ENTRY = re.compile(r"\((\d+),")


def donated_parameters(text: str) -> frozenset[int]:
    """Entry parameters whose buffers an executable may take over: `input_output_alias` and
    `buffer_donor` in the module's header.

    jax's `donate_argnums` and torch-xla's in-place updates write them: a run consumes those buffers,
    so each run of such an executable needs its own copies of them.
    """
    header = text[: text.find("\n")] if "\n" in text else text
    donated: set[int] = set()
    for attribute, entry in (("input_output_alias=", _ALIAS_ENTRY), ("buffer_donor=", _DONOR_ENTRY)):
        start = header.find(attribute + "{")
        if start < 0:
            continue
        depth, end = 0, start + len(attribute)
        for position in range(end, len(header)):  # to the brace that closes the list
            depth += {"{": 1, "}": -1}.get(header[position], 0)
            end = position
            if depth == 0:
                break
        donated.update(int(number) for number in entry.findall(header[start + len(attribute) : end + 1]))
    return frozenset(donated)
