"""The claims table as a reader sees it (notebooks 05 and 06): one narrow row per claim of `claims.table()`.

Display only: no builder imports this module, so changing it rebuilds nothing.
"""
from __future__ import annotations

import pandas as pd

COLUMNS = ["part", "value a", "value b", "difference", "5%", "95%", "verdict", "verdict at 5%",
           "beside: difference"]
_UNTESTABLE = r"^not testable here \((.*)\)$"


def _bare(verdicts: pd.Series) -> pd.Series:
    """Verdicts without their parenthesis: "not testable here (why)" -> "not testable here"."""
    return verdicts.astype("string").str.partition(" (")[0]


def readable(decided: pd.DataFrame, names: dict | None = None) -> tuple[pd.DataFrame, list[str]]:
    """`decided` (`claims.table()`, or some of its rows) as (table, reasons).

    The table has, per claim (renamed by `names`, {claim: shorter name}, where given): its part, the two
    values `a` and `b`, the difference, the 5%-95% interval as one column ("+0.004 to +0.035"; empty where
    there is none), the verdict and the verdict at 5% without their parenthesis, and the plain metric's
    difference beside. Columns a poor world lacks come out empty. `reasons`: why claims are "not testable
    here", each once, in table order.
    """
    rows = decided.reindex(columns=COLUMNS)
    low, high = (rows[end].astype(float).map("{:+.3f}".format) for end in ["5%", "95%"])
    table = pd.DataFrame({
        "part": rows["part"], "a": rows["value a"], "b": rows["value b"], "difference": rows["difference"],
        "5% to 95%": (low + " to " + high).where(rows["5%"].notna(), ""),
        "verdict": _bare(rows["verdict"]), "verdict at 5%": _bare(rows["verdict at 5%"]),
        "beside: difference": rows["beside: difference"],
    }, index=rows.index)
    reasons = rows["verdict"].str.extract(_UNTESTABLE)[0].dropna().unique().tolist()
    return table.rename(index=names or {}), reasons
