"""Configurations side by side: a matrix of cells (``matrix``) run and resumed as one
comparison (``core``), its tables and files (``report``, ``html``), and verdict trends across
stored runs (``trends``)."""
