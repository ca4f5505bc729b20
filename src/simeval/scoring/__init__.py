"""The scoring engine: text to terms, IDF sources, the scorer, eval sets, calibration.

It knows nothing of storage, HTTP or the command line.
"""
