"""Message sizes as nccl-tests takes them: '8:256M' sweeps 8 B to 256 MiB doubling each time."""

import re

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_SIZE = re.compile(r"(\d+)([KMG]?)(?:i?B)?", re.I)


class SizeError(ValueError):
    pass


def parse_size(text):
    match = _SIZE.fullmatch(text.strip())
    if not match or int(match.group(1)) == 0:
        raise SizeError(
            f"{text!r} is not a size (expected a whole number of bytes, "
            "optionally with K, M or G, such as 8, 64K or 256M)"
        )
    return int(match.group(1)) * UNITS[match.group(2).upper()]


def parse_sweep(text, factor=2):
    """'8:256M' -> [8, 16, ..., 268435456]; '128M' -> [134217728]; 'A,B,C' -> those sizes."""
    if factor < 2:
        raise SizeError(f"size factor {factor} must be 2 or more")
    if "," in text:
        return sorted({parse_size(part) for part in text.split(",")})
    low, sep, high = text.partition(":")
    first = parse_size(low)
    last = parse_size(high) if sep else first
    if last < first:
        raise SizeError(f"{text!r}: the largest size is below the smallest (expected MIN:MAX)")
    sizes, size = [], first
    while size <= last:
        sizes.append(size)
        size *= factor
    return sizes


def human(nbytes):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return str(nbytes)
