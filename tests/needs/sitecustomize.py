"""Loaded by every Python the test suite starts (this folder is on their ``PYTHONPATH``): the
audit hook that reports what a test starts without its marker (``kc_needs``)."""

import kc_needs

kc_needs.install()
