"""One value per labelled quantity across the series (tools/quantities.py): a table cell is named by its row
and column labels, and the same names never carry two values in the learners' notebooks."""
import pandas as pd

from tools.quantities import table_quantities, two_valued


def test_cells_are_named_by_every_row_and_column_label():
    frame = pd.DataFrame({("AUC", "full"): [0.81, 0.72], ("AUC", "contrast"): [0.61, 0.55]},
                         index=pd.MultiIndex.from_tuples([("oracle", "seed 0"), ("oracle", "seed 1")],
                                                         names=["method", "seed"]))
    found = {(labels, columns): value for labels, columns, value in table_quantities(frame.to_html())}
    assert found[(("method", "seed", "oracle", "seed 1"), ("AUC", "contrast"))] == "0.55"
    assert len(found) == 4
    # row numbers label nothing; text cells are not quantities
    plain = pd.DataFrame({"method": ["a", "b"], "AUC": [0.5, 0.6]})
    assert list(table_quantities(plain.to_html())) == []


def test_two_values_under_one_label_are_found(tmp_path):
    import json

    def notebook(value):
        html = pd.DataFrame({"ECE (5 bins)": [value]}, index=["RL"]).to_html()
        return {"cells": [{"cell_type": "code", "outputs": [{"data": {"text/html": html}}]}]}

    paths = []
    for name, value in [("01_a.ipynb", 0.063), ("02_b.ipynb", 0.069), ("03_c.ipynb", 0.063)]:
        (tmp_path / name).write_text(json.dumps(notebook(value)))
        paths.append(tmp_path / name)
    assert two_valued(paths[::2]) == {}
    clash = two_valued(paths)
    assert list(clash) == [(("RL",), ("ECE (5 bins)",))]
    assert set(clash[(("RL",), ("ECE (5 bins)",))]) == {"0.063", "0.069"}


def test_no_labelled_quantity_has_two_values_in_the_series():
    clashes = two_valued()
    shown = "\n".join(f"{' / '.join(labels)} | {' / '.join(columns)}: {values}"
                      for (labels, columns), values in sorted(clashes.items()))
    assert not clashes, ("the same labels print two values; say in a label what differs "
                         f"(`python tools/quantities.py`):\n{shown}")


def test_one_value_at_two_precisions_is_one_value(tmp_path):
    import json

    def notebook(text):
        html = ("<table><thead><tr><th></th><th>AUC</th></tr></thead>"
                f"<tbody><tr><th>RL</th><td>{text}</td></tr></tbody></table>")
        return {"cells": [{"cell_type": "code", "outputs": [{"data": {"text/html": html}}]}]}

    paths = []
    printed = [("01_a.ipynb", "0.82"), ("02_b.ipynb", "0.820"), ("03_c.ipynb", "82.0%"), ("04_d.ipynb", "0.83")]
    for name, text in printed:
        (tmp_path / name).write_text(json.dumps(notebook(text)))
        paths.append(tmp_path / name)
    assert two_valued(paths[:3]) == {}
    assert two_valued(paths[1:])  # 0.820 against 0.83
