"""kafka-chaos: the CLI (``cli``), run orchestration (``runner``) and verdict rendering."""

__version__ = "0.2.0"
