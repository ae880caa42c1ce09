"""Figures: reliability diagrams and the other plots (`plots`), and the ipywidgets explorers that redraw
them from controls (`explorers`)."""
