"""Helpers for the notebook series on the confidence calibration of language models."""
import warnings

# tqdm.auto (imported by transformers) warns in Jupyter when ipywidgets is absent; the series
# uses plain text progress bars on purpose, so that committed notebooks carry no widget state.
warnings.filterwarnings("ignore", message="IProgress not found")
