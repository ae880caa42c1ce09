"""The cache: every heavy result is built once and then loaded (`artifacts`), and the trained world the
repository ships under data/world/ (`shipped`). Machinery: a learner calls `load_or_build` and need not
read further. Imports only `helpers.config`."""
