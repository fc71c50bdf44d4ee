"""Unit constants. Internally the planner uses bytes, seconds, flop and flop/s.

Profile files and API fields may use human units in their names (`_gib`,
`_gb_per_s`, `_tflops`); they are converted once, at the edge, with these.
"""

from typing import Final

KIB: Final = 2**10
MIB: Final = 2**20
GIB: Final = 2**30

GB: Final = 10**9
TERA: Final = 10**12
GIGA: Final = 10**9
MICRO: Final = 1e-6

BITS_PER_BYTE: Final = 8

SECONDS_PER_DAY: Final = 86_400
SECONDS_PER_HOUR: Final = 3_600
