"""Calibration metrics and statistics on arrays of confidences and outcomes: ECE, reliability tables,
AUROC and Brier (`metrics`), argument checks (`validation`), knowledge contrast sets and their
normalization (`contrast`), bootstrap intervals (`stats`, `shared_bootstrap`) and the claims decided by
them (`findings`). No model and no cache: everything here works on numbers."""
