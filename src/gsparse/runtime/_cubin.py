"""What a CUBIN declares about itself: the names of its kernels.

A CUBIN is a 64-bit little-endian ELF file. Its symbol table names every function; those the
driver can launch (``__global__`` entry functions) carry the CUDA entry flag in ``st_other``,
while device functions that ptxas did not inline are plain local functions.
"""

from __future__ import annotations

import struct

_ELF_IDENT = b"\x7fELF\x02\x01"  # magic, 64-bit, little endian
# e_shoff, then (after e_flags, e_ehsize, e_phentsize, e_phnum) e_shentsize and e_shnum.
_SECTION_TABLE = struct.Struct("<40xQ10xHH")
# sh_type, sh_offset, sh_size, sh_link, sh_entsize.
_SECTION = struct.Struct("<4xI16xQQI12xQ")
_SYMBOL = struct.Struct("<IBBHQQ")  # st_name, st_info, st_other, st_shndx, st_value, st_size
_SHT_SYMTAB = 2
_STT_FUNC = 2
_STO_CUDA_ENTRY = 0x10


def kernel_names(cubin: bytes) -> frozenset[str]:
    """The entry functions (kernels) ``cubin`` defines, by their symbol names.

    Raises ValueError when ``cubin`` is not a 64-bit little-endian ELF file with a symbol table.
    """
    if not cubin.startswith(_ELF_IDENT):
        raise ValueError("cubin is not a 64-bit little-endian ELF file")
    table_offset, entry_size, count = _SECTION_TABLE.unpack_from(cubin)
    sections = [_SECTION.unpack_from(cubin, table_offset + i * entry_size) for i in range(count)]
    for kind, offset, size, link, symbol_size in sections:
        if kind != _SHT_SYMTAB:
            continue
        strings = sections[link][1]
        names = set()
        for at in range(offset, offset + size, symbol_size):
            name, info, other, *_ = _SYMBOL.unpack_from(cubin, at)
            if info & 0xF == _STT_FUNC and other & _STO_CUDA_ENTRY:
                names.add(_string(cubin, strings + name))
        return frozenset(names)
    raise ValueError("cubin has no symbol table")


def _string(data: bytes, start: int) -> str:
    return data[start : data.index(b"\0", start)].decode()
