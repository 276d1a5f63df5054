"""Compatibility facts as data plus the functions that apply them, each fact with its source.

One fact lives in one place: the matrix check, the rendered labels, `matrix explain` and the
host preflight all read these modules and never restate a number.
"""
