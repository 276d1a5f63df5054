"""trainimg's host-side toolkit: matrix, rules, rendering, engines, verify and preflight.

The pure core (matrix, rules, render, requirements) does no I/O beyond reading its inputs;
effects (engines, hosts, containers) live at the edges.
"""

__version__ = "0.1.0"
