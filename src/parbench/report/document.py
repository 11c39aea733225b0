"""The report as data (sections of paragraphs, tables and figures) and its two renderings:
report.md beside its PNGs and CSVs, and report.html with every image embedded (one file that
opens from disk or from MLflow's artifact view)."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from parbench.report.fmt import DASH

MARKDOWN = "report.md"
HTML = "report.html"
FIGURE_SCALE = 0.85  # figures are shown at 85 % of their pixel size (at most the page's width): one text size in all


@dataclass
class Paragraph:
    text: str  # **bold** and `code` are rendered in both outputs


@dataclass
class Table:
    shown: pd.DataFrame  # formatted for people (strings)
    data: pd.DataFrame  # the numbers behind it, written as CSV
    csv: str
    caption: str = ""

    def __post_init__(self) -> None:
        """Columns without a single value (every cell `–`) say nothing: left out of the shown table."""
        empty = [c for c in self.shown.columns if len(self.shown) and (self.shown[c].astype(str) == DASH).all()]
        self.shown = self.shown.drop(columns=empty)


@dataclass
class Figure:
    path: Path
    caption: str


@dataclass
class Section:
    title: str
    blocks: list = field(default_factory=list)
    subsections: list["Section"] = field(default_factory=list)

    def add(self, *blocks) -> "Section":
        self.blocks.extend(b for b in blocks if b is not None)
        return self

    def __bool__(self) -> bool:
        return bool(self.blocks or any(self.subsections))


@dataclass
class Report:
    title: str
    intro: list[Paragraph]
    sections: list[Section]

    def files(self) -> list[str]:
        """CSV and PNG names the report refers to."""
        return [name for section in self.sections for name in _files(section)]


def _files(section: Section) -> list[str]:
    names = [b.csv for b in section.blocks if isinstance(b, Table)]
    names += [b.path.name for b in section.blocks if isinstance(b, Figure)]
    return names + [n for sub in section.subsections for n in _files(sub)]


def write(report: Report, out_dir: Path) -> list[Path]:
    """report.md, report.html and the CSVs; the PNGs are already in out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for section in report.sections:
        _write_csvs(section, out_dir)
    (out_dir / MARKDOWN).write_text(to_markdown(report))
    (out_dir / HTML).write_text(to_html(report))
    return [out_dir / MARKDOWN, out_dir / HTML, *(out_dir / name for name in report.files())]


def _write_csvs(section: Section, out_dir: Path) -> None:
    for block in section.blocks:
        if isinstance(block, Table):
            block.data.to_csv(out_dir / block.csv, index=False)
    for sub in section.subsections:
        _write_csvs(sub, out_dir)


def to_markdown(report: Report) -> str:
    lines = [f"# {report.title}", ""] + [p.text + "\n" for p in report.intro]
    for section in report.sections:
        lines += _markdown_section(section, 2)
    return "\n".join(lines).rstrip() + "\n"


def _markdown_section(section: Section, level: int) -> list[str]:
    lines = ["#" * level + " " + section.title, ""]
    for block in section.blocks:
        if isinstance(block, Paragraph):
            lines += [block.text, ""]
        elif isinstance(block, Table):
            lines += ([f"*{block.caption}*", ""] if block.caption else []) + [_markdown_table(block.shown),
                                                                             f"\n([{block.csv}]({block.csv}))", ""]
        elif isinstance(block, Figure):
            lines += [f"![{block.caption}]({block.path.name})", "", f"*{block.caption}*", ""]
    for sub in section.subsections:
        if sub:
            lines += _markdown_section(sub, level + 1)
    return lines


def _markdown_table(frame: pd.DataFrame) -> str:
    cells = [[str(c) for c in frame.columns]] + [[str(v).replace("|", "\\|") for v in row]
                                                 for row in frame.itertuples(index=False)]
    header, *rows = ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join([header, "|" + "---|" * len(frame.columns), *rows])


CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1250px;
       color: #222; line-height: 1.45; padding: 0 1em; }
h1 { border-bottom: 2px solid #4C72B0; padding-bottom: .2em; }
h2 { border-bottom: 1px solid #ddd; margin-top: 2em; }
table { border-collapse: collapse; margin: .6em 0 .3em; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 4px 9px; text-align: right; white-space: nowrap; }
th { background: #f3f5f8; }
td:first-child, th:first-child { text-align: left; }
tr:nth-child(even) td { background: #fafbfc; }
figure { margin: 1em 1% 1em 0; display: inline-block; vertical-align: top; max-width: 98%; }
figure img { width: 100%; border: 1px solid #eee; }
figcaption, .caption { color: #555; font-size: 13px; font-style: italic; }
.csv { font-size: 12px; color: #777; }
code { background: #f3f5f8; padding: 0 3px; border-radius: 3px; }
.table-wrap { overflow-x: auto; }
"""


def to_html(report: Report) -> str:
    body = [f"<h1>{html.escape(report.title)}</h1>"] + [f"<p>{_inline(p.text)}</p>" for p in report.intro]
    for section in report.sections:
        body += _html_section(section, 2)
    return ("<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
            f"<title>{html.escape(report.title)}</title><style>{CSS}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _html_section(section: Section, level: int) -> list[str]:
    parts = [f"<h{level}>{html.escape(section.title)}</h{level}>"]
    for block in section.blocks:
        if isinstance(block, Paragraph):
            parts.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Table):
            caption = f"<div class='caption'>{_inline(block.caption)}</div>" if block.caption else ""
            table = block.shown.to_html(index=False, escape=True, border=0)
            parts.append(f"{caption}<div class='table-wrap'>{table}</div><div class='csv'>{block.csv}</div>")
        elif isinstance(block, Figure):
            png = block.path.read_bytes()
            width = round(_png_width(png) * FIGURE_SCALE)
            parts.append(f"<figure style='width: {width}px'><img src='data:image/png;base64,{base64.b64encode(png).decode()}' "
                         f"alt='{html.escape(block.caption)}'>"
                         f"<figcaption>{_inline(block.caption)}</figcaption></figure>")
    for sub in section.subsections:
        if sub:
            parts += _html_section(sub, level + 1)
    return parts


def _png_width(png: bytes) -> int:
    """Pixel width from the PNG header (IHDR: bytes 16-20, big-endian)."""
    return int.from_bytes(png[16:20], "big")


def _inline(text: str) -> str:
    text = html.escape(text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    text = re.sub(r"\*(\S.*?)\*", r"<em>\1</em>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)
