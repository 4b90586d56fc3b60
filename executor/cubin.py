"""Kernel names from a CUBIN (an ELF file), for when the compiler printed no resource report.

The ``-Xptxas -v`` report names every kernel, but not every NVRTC release prints it (CUDA 13.0's
NVRTC, as seen on an H100 host, returns an empty log). A CUBIN keeps each kernel's code in a section
named ``.text.<symbol>`` next to its attributes in ``.nv.info.<symbol>``; reading the section header
table is enough to list them, with no CUDA library involved.
"""

from __future__ import annotations

import struct

_ELF_MAGIC = b"\x7fELF"
_ELFCLASS64 = 2
_ELFDATA2LSB = 1


class CubinFormatError(ValueError):
    """The bytes are not a 64-bit little-endian ELF file as CUDA writes it."""


def kernel_names(cubin: bytes) -> list[str]:
    """Symbols of the kernels (``__global__`` functions) in a CUBIN, in section order."""
    if len(cubin) < 64 or cubin[:4] != _ELF_MAGIC:
        raise CubinFormatError("not an ELF file")
    if cubin[4] != _ELFCLASS64 or cubin[5] != _ELFDATA2LSB:
        raise CubinFormatError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    if shentsize < 64 or shoff + shnum * shentsize > len(cubin) or shstrndx >= shnum:
        raise CubinFormatError("section header table out of bounds")

    def section(index: int) -> tuple[int, int, int]:
        base = shoff + index * shentsize
        name, _type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", cubin, base)
        return name, offset, size

    _, str_off, str_size = section(shstrndx)
    if str_off + str_size > len(cubin):
        raise CubinFormatError("section name table out of bounds")
    names = cubin[str_off : str_off + str_size]
    kernels: list[str] = []
    info: set[str] = set()
    texts: list[str] = []
    for index in range(shnum):
        name_off, _, _ = section(index)
        end = names.find(b"\0", name_off)
        if name_off >= len(names) or end < 0:
            continue
        label = names[name_off:end].decode("utf-8", "replace")
        if label.startswith(".text."):
            texts.append(label[len(".text.") :])
        elif label.startswith(".nv.info."):
            info.add(label[len(".nv.info.") :])
    # A .text section with attributes is a kernel; device functions that were not inlined have code
    # but no .nv.info.<name> section. Older toolchains always write both for kernels.
    kernels = [t for t in texts if t in info] or texts
    return kernels
