"""One look for every report figure: text sizes that stay readable once a figure is scaled into
the page (half-width figures are drawn about as wide as they are shown), and one colour per run
or layout, the same in every figure of the report."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TEXT = 11  # points: titles, axis labels, legends, tick labels
HALF_WIDTH_IN = 6.5  # a figure shown at half the page: 715 px at 110 dpi into ~600 px
WIDE_IN = 11.0  # a figure shown across the page
DPI = 110
RC = {"font.size": TEXT, "axes.titlesize": TEXT + 1, "axes.labelsize": TEXT, "xtick.labelsize": TEXT - 1,
      "ytick.labelsize": TEXT - 1, "legend.fontsize": TEXT - 1, "figure.titlesize": TEXT + 1}
plt.rcParams.update(RC)  # report figures only: this module is imported by the report's plots


def palette(names: list[str]) -> dict[str, tuple]:
    """A colour per name, in the order given (the report's order: by device count, then name)."""
    cmap = plt.get_cmap("tab10")
    return {name: cmap(i % 10) for i, name in enumerate(dict.fromkeys(names))}


def slanted(ax) -> None:
    """Run names under bars, slanted so long ones fit."""
    for label in ax.get_xticklabels():
        label.set_rotation(25)
        label.set_ha("right")
