"""The results tables of notebooks 05 and 06 and the cached findings of notebooks 03-06 (`comparison`):
every method's confidences, scored on full and contrast sets and compared by the shared bootstrap."""
