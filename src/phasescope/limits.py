"""Upper bounds on what one command may ask of this machine, checked before any work starts.

A count that would need more memory than is available (offsets x prompt length, theory
starts, preference rows, a demo prompt, a model's parameters) is refused with the largest
value that fits, instead of swapping, being killed, or running without end. The estimates
are deliberately generous (they count what the command holds at its peak, with headroom), so a
value that passes can still be slow, but never exhausts memory by orders of magnitude.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from phasescope.errors import InputError

PROMPT_TOKEN_BYTES = 40  # one token of a prompt held as a Python list of ints (pointer + int object)
HEADROOM = 0.8  # of the memory available now: the rest is for the interpreter, torch and the OS


def available_bytes() -> int | None:
    """Memory available to a new allocation now (Linux: MemAvailable), else physical memory, else None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def gib(n: float) -> str:
    if n >= 2**50:
        return f"{n / 2**50:,.0f} PiB"
    return f"{n / 2**30:,.1f} GiB" if n >= 2**28 else f"{n / 2**20:,.0f} MiB"


def refuse_unless_fits(what: str, need: float, fix: str) -> None:
    """InputError when ``need`` bytes exceed the memory there is: ``what`` needs it, ``fix`` says what to do."""
    available = available_bytes()
    if available is not None and need > HEADROOM * available:
        raise InputError(
            f"{what} needs about {gib(need)} of memory, more than the {gib(available)} available here: {fix}"
        )


def refuse_beyond_memory(
    option: str, value: int, need: Callable[[int], float], hint: str = "", shown: Callable[[int], str] = str
) -> None:
    """InputError when ``need(value)`` bytes exceed the memory there is, naming the largest value
    of ``option`` that fits (``need`` must grow with its argument; ``shown`` writes a value as the
    option takes it)."""
    available = available_bytes()
    if available is None:
        return
    budget = HEADROOM * available
    if need(value) <= budget:
        return
    low, high = 0, value  # need(low) fits (or low is 0), need(high) does not
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if need(middle) <= budget else (low, middle)
    largest = f"the largest that fits is {option} {shown(low)}" if low else "no value fits"
    raise InputError(
        f"{option} {shown(value)} needs about {gib(need(value))} of memory, more than the {gib(available)} available "
        f"here: {largest}{'; ' + hint if hint else ''}"
    )
