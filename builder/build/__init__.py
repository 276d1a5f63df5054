"""Building a cell's image: the plan, the build context and its build hash, the wheelhouse and
its closure, the offline base, the build itself, its journal and its lock record."""
