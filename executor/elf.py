"""The section headers of a 64-bit little-endian ELF file, read with ``struct`` alone: what a CUBIN
(:mod:`executor.cubin`) and a function candidate's shared library (:mod:`executor.linkcheck`) are
read through. It fails closed: a header table that is missing, cut short or out of the file raises
:class:`ElfFormatError`; a count too large for the ELF header (65,280 sections or more) is read from
the first section header, where the format puts it."""

from __future__ import annotations

import struct
from dataclasses import dataclass

_MAGIC = b"\x7fELF"
_SHN_XINDEX = 0xFFFF  # e_shstrndx: the section name table's index is in the first header's sh_link


class ElfFormatError(ValueError):
    """The bytes are not a 64-bit little-endian ELF file whose section headers can be read whole."""


@dataclass(frozen=True)
class Section:
    """One section header: its name's offset in the section name table, its type (``sh_type``), and
    where its bytes lie; ``link`` is ``sh_link`` (for a symbol table, its string table's index)."""

    name_at: int
    kind: int
    offset: int
    size: int
    link: int

    def data(self, elf: bytes) -> bytes:
        """The section's bytes, all of them (else :class:`ElfFormatError`)."""
        if self.offset + self.size > len(elf):
            raise ElfFormatError("a section out of the file")
        return elf[self.offset : self.offset + self.size]


def sections(elf: bytes) -> tuple[list[Section], int]:
    """Every section header of ``elf``, and the index of the section name table."""
    if len(elf) < 64 or elf[:4] != _MAGIC or elf[4] != 2 or elf[5] != 1:
        raise ElfFormatError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    if shentsize < 64 or shoff == 0 or shoff + shentsize > len(elf):
        raise ElfFormatError("no section header table")
    if shnum == 0:  # 65,280 sections or more: the count is the first header's sh_size
        (shnum,) = struct.unpack_from("<Q", elf, shoff + 0x20)
    if shstrndx == _SHN_XINDEX:
        (shstrndx,) = struct.unpack_from("<I", elf, shoff + 0x28)
    if shoff + shnum * shentsize > len(elf):
        raise ElfFormatError("section header table out of bounds")
    headers = []
    for i in range(shnum):
        name_at, kind, _flags, _addr, offset, size, link = struct.unpack_from(
            "<IIQQQQI", elf, shoff + i * shentsize
        )
        headers.append(Section(name_at, kind, offset, size, link))
    return headers, shstrndx
