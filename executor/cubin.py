"""Kernel names from a CUBIN (an ELF file), for when the compiler printed no resource report.

The ``-Xptxas -v`` report names every kernel, but not every NVRTC release prints it (CUDA 13.0's
NVRTC, as seen on an H100 host, returns an empty log). A CUBIN keeps each kernel's code in a section
named ``.text.<symbol>`` next to its attributes in ``.nv.info.<symbol>``; reading the section header
table is enough to list them, with no CUDA library involved.
"""

from __future__ import annotations

from executor.elf import ElfFormatError, sections

# What kernel_names raises: the bytes are not a 64-bit little-endian ELF file as CUDA writes it.
CubinFormatError = ElfFormatError


def kernel_names(cubin: bytes) -> list[str]:
    """Symbols of the kernels (``__global__`` functions) in a CUBIN, in section order."""
    headers, shstrndx = sections(cubin)
    if shstrndx >= len(headers):
        raise CubinFormatError("section name table out of bounds")
    names = headers[shstrndx].data(cubin)
    info: set[str] = set()
    texts: list[str] = []
    for header in headers:
        name_off = header.name_at
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
    return [t for t in texts if t in info] or texts
