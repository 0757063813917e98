"""Large constants travel by digest: module text names them, their values sit in a content-addressed store.

A model with its weights as constants prints as hundreds of MB of text (every float in decimal), and
every step -- printing, moving the text to and from the compiler worker, parsing it, fingerprinting
it, caching it -- would cost in proportion to those bytes. So when the constants XLA's printer elides
(`constant({...})`) hold at least `PAYLOAD_MIN_BYTES`, xlabench's text of the module names each one
by the sha256 of its `LiteralProto` instead (`constant({xlabench-payload:HEX})`) and keeps the
literal in `$XLABENCH_CACHE_DIR/payloads/`. The worker puts the real values back before XLA sees the
module (parse the elided text, then patch each literal into the module's proto), so every pass sees
the real constants; the digest in the text keeps fingerprints and the transition cache exact.
Modules below the threshold (every suite graph) print exactly as before.

Field numbers are those of xla/service/hlo.proto: HloModuleProto.computations = 3,
HloComputationProto.instructions = 2, HloInstructionProto.name = 1, .literal = 8.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Iterator

from xlabench.files import write_atomically

# Elided constants of at least this many bytes in all make a module carry payloads.
PAYLOAD_MIN_BYTES = 4 * 2**20
MARKER = "xlabench-payload:"
_PAYLOAD = re.compile(
    r"^(\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=[^\n]*?\sconstant\()\{xlabench-payload:([0-9a-f]{64})\}\)", re.M
)
_ELIDED = re.compile(
    r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*([a-z][a-z0-9]*)\[([\d,]*)\][^\n]*?\sconstant\(\{\.\.\.\}\)", re.M
)
_BITS = {"pred": 8, "s2": 8, "u2": 8, "s4": 8, "u4": 8, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "f16": 16,
         "bf16": 16, "s32": 32, "u32": 32, "f32": 32, "s64": 64, "u64": 64, "f64": 64, "c64": 64,
         "c128": 128}  # fmt: skip
_COMPUTATIONS, _INSTRUCTIONS, _NAME, _LITERAL = 3, 2, 1, 8


class MissingPayload(Exception):
    """A module names a constant whose values are not in the payload store (the worker answers it as a
    compiler failure about the module)."""


def payload_directory() -> str:
    """Where payloads live: `payloads/` in the cache directory (shared by the caller and its workers)."""
    from xlabench.xla.shared.cache_directory import cache_directory

    return os.path.join(cache_directory(), "payloads")


def has_payloads(text: str) -> bool:
    """Whether module text names constants by payload digest."""
    return MARKER in text


def elided_bytes(text: str) -> int:
    """The bytes of the constants XLA's printer elided in `text` (`constant({...})`)."""
    total = 0
    for _, element_type, dims in _ELIDED.findall(text):
        elements = 1
        for dim in filter(None, dims.split(",")):
            elements *= int(dim)
        total += elements * _BITS.get(element_type, 64) // 8
    return total


def elided_names(text: str) -> list[str]:
    """The instruction names of the elided constants in `text`, in order."""
    return [name for name, _, _ in _ELIDED.findall(text)]


def store(literal: bytes) -> str:
    """Keep a serialized LiteralProto in the store (once); its digest."""
    digest = hashlib.sha256(literal).hexdigest()
    path = os.path.join(payload_directory(), digest[:2], digest)
    try:
        kept = os.path.getsize(path) == len(literal)
    except OSError:
        kept = False
    if not kept:  # missing, or cut short (a killed writer, a full disk): written whole
        write_atomically(path, literal)
    return digest


def all_stored(text: str) -> bool:
    """Whether the store holds every payload module text names (not checked: `load` checks)."""
    return not has_payloads(text) or all(
        os.path.exists(os.path.join(payload_directory(), digest[:2], digest))
        for digest in without_markers(text)[1].values()
    )


def load(digest: str) -> bytes:
    """The serialized LiteralProto of a digest, checked; MissingPayload when it is not stored."""
    path = os.path.join(payload_directory(), digest[:2], digest)
    try:
        with open(path, "rb") as handle:
            literal = handle.read()
    except OSError:
        raise MissingPayload(
            f"constant payload {digest[:12]} is not in {payload_directory()} (the module text was made "
            "with another cache directory: load the original module again)"
        ) from None
    if hashlib.sha256(literal).hexdigest() != digest:
        # Removed, so that loading the original module again stores it whole.
        with contextlib.suppress(OSError):
            os.remove(path)
        raise MissingPayload(
            f"constant payload {path} was damaged (checksum mismatch) and is removed: load the original "
            "module again"
        )
    return literal


def with_markers(elided_text: str, literals: dict[str, bytes]) -> str:
    """Elided module text with each `{...}` named in `literals` replaced by its payload digest."""
    digests = {name: store(literal) for name, literal in literals.items()}

    def mark(match: re.Match[str]) -> str:
        digest = digests.get(match.group(1))
        line = match.group(0)
        return line if digest is None else line.replace("constant({...})", f"constant({{{MARKER}{digest}}})")

    return _ELIDED.sub(mark, elided_text)


def without_markers(text: str) -> tuple[str, dict[str, str]]:
    """(text XLA can parse, the constants elided in it: {instruction name: digest})."""
    named: dict[str, str] = {}

    def elide(match: re.Match[str]) -> str:
        named[match.group(2)] = match.group(3)
        return match.group(1) + "{...})"

    return _PAYLOAD.sub(elide, text), named


# --- the protobuf wire format, just what a module proto's literals need ---


def read_varint(data: bytes, position: int) -> tuple[int, int]:
    """(the varint at `position`, the position after it)."""
    value, shift = 0, 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def message_fields(data: bytes) -> Iterator[tuple[int, int, int, int, int]]:
    """(field, wire type, start of the field, start of its value, end) for each field of a message;
    ValueError on a wire type no field of an HLO proto has."""
    position = 0
    while position < len(data):
        start = position
        tag, position = read_varint(data, position)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            _, end = read_varint(data, position)
        elif wire == 2:
            length, position = read_varint(data, position)
            end = position + length
        elif wire in (1, 5):
            end = position + (8 if wire == 1 else 4)
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield field, wire, start, position, end
        position = end


def _length_delimited(field: int, value: bytes) -> bytes:
    return _encode_varint(field << 3 | 2) + _encode_varint(len(value)) + value


def _instructions(module_proto: bytes) -> Iterator[tuple[bytes, dict[int, bytes]]]:
    """(instruction proto, its name and literal fields) for every instruction of a module proto."""
    for field, wire, _, value, end in message_fields(module_proto):
        if field == _COMPUTATIONS and wire == 2:
            computation = module_proto[value:end]
            for inner, inner_wire, _, start, stop in message_fields(computation):
                if inner == _INSTRUCTIONS and inner_wire == 2:
                    instruction = computation[start:stop]
                    found = {
                        number: instruction[begin:finish]
                        for number, kind, _, begin, finish in message_fields(instruction)
                        if number in (_NAME, _LITERAL) and kind == 2
                    }
                    yield instruction, found


def literals(module_proto: bytes, names: list[str]) -> dict[str, bytes]:
    """The serialized LiteralProto of each named constant instruction of a serialized HloModuleProto."""
    wanted = set(names)
    found = {}
    for _, fields in _instructions(module_proto):
        name = fields.get(_NAME, b"").decode()
        if name in wanted and _LITERAL in fields:
            found[name] = fields[_LITERAL]
    missing = wanted - set(found)
    if missing:
        raise ValueError(f"module proto lacks the literals of {', '.join(sorted(missing))}")
    return found


def patch_literals(module_proto: bytes, replacements: dict[str, bytes]) -> bytes:
    """The serialized HloModuleProto with the literal of each named instruction replaced."""

    def instruction(data: bytes) -> bytes:
        fields = list(message_fields(data))
        name = next((data[v:e].decode() for f, w, _, v, e in fields if f == _NAME and w == 2), None)
        if name not in replacements:
            return data
        kept = b"".join(data[s:e] for f, _, s, _, e in fields if f != _LITERAL)
        return kept + _length_delimited(_LITERAL, replacements[name])

    def message(data: bytes, child: int, rewrite: object) -> bytes:
        parts = []
        for field, wire, start, value, end in message_fields(data):
            if field == child and wire == 2:
                parts.append(_length_delimited(field, rewrite(data[value:end])))  # type: ignore[operator]
            else:
                parts.append(data[start:end])
        return b"".join(parts)

    return message(module_proto, _COMPUTATIONS, lambda c: message(c, _INSTRUCTIONS, instruction))
