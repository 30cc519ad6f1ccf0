"""Text a learner cannot read in the dark theme: colours hard-coded for a white page (white on a pink row, grey on
black). Read from the page after JupyterLab switched to its dark theme, figures excluded (plotly draws its own).

The contrast ratio is WCAG's, (L1 + 0.05) / (L2 + 0.05) of the relative luminances of the text's colour and of the
first opaque background behind it; below ``MIN_CONTRAST`` (WCAG's floor for large text) the text is reported.
"""

from __future__ import annotations

MIN_CONTRAST = 3.0
DARK, LIGHT = "JupyterLab Dark", "JupyterLab Light"

SET_THEME = "async (name) => { await window.jupyterapp.commands.execute('apputils:change-theme', {theme: name}); }"

# the notebook's root, a CSS colour parsed to [r, g, b, a], WCAG's relative luminance: shared by both readers
COMMON = r"""
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const root = (panel && panel.content && panel.content.node) || document.querySelector(rootSelector) || document;
  const rgba = (s) => { const m = /rgba?\(([^)]+)\)/.exec(s || '');
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const lum = ([r, g, b]) => { const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
"""

# (rootSelector) => Array<{cell, text, ratio}>: each output element with text whose contrast is below 3
CONTRAST = r"""
(rootSelector) => {
__COMMON__  const background = (el) => { for (let e = el; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0.5) return c; }
    return rgba(getComputedStyle(document.body).backgroundColor) || [255, 255, 255, 1]; };
  const found = [];
  [...root.querySelectorAll('.jp-Cell')].forEach((cell, i) => {
    for (const area of cell.querySelectorAll('.jp-OutputArea-output')) {
      const walk = document.createTreeWalker(area, NodeFilter.SHOW_TEXT);
      const seen = new Set();
      for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        const el = n.parentElement;
        if (!n.textContent.trim() || seen.has(el) || el.closest('svg, .js-plotly-plot, input, select')) continue;
        seen.add(el);
        const box = el.getBoundingClientRect();
        if (box.width === 0 || box.height === 0) continue;
        const fg = rgba(getComputedStyle(el).color), bg = background(el);
        if (!fg) continue;
        const [a, b] = [lum(fg), lum(bg)];
        const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        if (ratio < 3) found.push({cell: i, text: n.textContent.trim().slice(0, 60), ratio: Math.round(ratio * 100) / 100});
      }
    }
  });
  return found;
}
"""


# (rootSelector) => Array<{cell, bg, text}>: each plotly figure's background luminance and its title/tick text's
# contrast on that background, read after the page style (rlnb.viz.figures.page_style) had its chance to repaint it
FIGURES = r"""
(rootSelector) => {
__COMMON__  const found = [];
  [...root.querySelectorAll('.jp-Cell')].forEach((cell, i) => {
    for (const plot of cell.querySelectorAll('.jp-OutputArea-output .js-plotly-plot')) {
      const svg = plot.querySelector('svg.main-svg');
      const bg = svg && rgba(getComputedStyle(svg).backgroundColor);
      if (!bg || bg[3] < 0.5) continue;
      let worst = 21;
      for (const t of plot.querySelectorAll('.gtitle, .xtitle, .ytitle, .xtick text, .ytick text, .legendtext')) {
        const fg = rgba(getComputedStyle(t).fill);
        if (!fg || !t.textContent.trim()) continue;
        const [a, b] = [lum(fg), lum(bg)];
        worst = Math.min(worst, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05));
      }
      found.push({cell: i, bg: Math.round(lum(bg) * 100) / 100, text: Math.round(worst * 100) / 100});
    }
  });
  return found;
}
"""
CONTRAST, FIGURES = (js.replace("__COMMON__", COMMON.lstrip("\n")) for js in (CONTRAST, FIGURES))
DARK_FIGURE = 0.2  # a figure's background above this luminance is a light box on the dark page


def figure_problems(found: list[dict]) -> list[str]:
    """One line per cell whose plotly figure stays light in the dark theme or whose text does not read on it."""
    out = []
    for cell in sorted({f["cell"] for f in found}):
        items = [f for f in found if f["cell"] == cell]
        light = [f for f in items if f["bg"] > DARK_FIGURE]
        faint = [f for f in items if f["text"] < MIN_CONTRAST]
        if light:
            out.append(f"cell {cell}: {len(light)} plotly figures stay light in the dark theme "
                       f"(background luminance {max(f['bg'] for f in light)})")
        if faint:
            out.append(f"cell {cell}: figure text below contrast {MIN_CONTRAST} in the dark theme "
                       f"(worst {min(f['text'] for f in faint)})")
    return out


def contrast_problems(found: list[dict]) -> list[str]:
    """One line per cell: how many texts read below ``MIN_CONTRAST`` in the dark theme, and the worst."""
    by_cell: dict[int, list[dict]] = {}
    for f in found:
        by_cell.setdefault(f["cell"], []).append(f)
    out = []
    for cell, items in sorted(by_cell.items()):
        worst = min(items, key=lambda f: f["ratio"])
        out.append(f"cell {cell}: {len(items)} texts below contrast {MIN_CONTRAST} in the dark theme, "
                   f"worst {worst['ratio']} on {worst['text']!r}")
    return out


def dark_theme_problems(page) -> list[str]:
    """Switch JupyterLab to its dark theme, read the contrast of every output's text and whether every plotly
    figure turned dark with readable text, switch back."""
    page.evaluate(SET_THEME, DARK)
    try:
        # JupyterLab marks the body once the dark theme's stylesheet applies
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=20_000)
    except Exception:  # noqa: BLE001  (playwright's TimeoutError)
        return ["the page did not switch to JupyterLab's dark theme within 20 s: its contrast was not checked"]
    try:
        page.wait_for_timeout(500)  # widgets restyle
        return (contrast_problems(page.evaluate(CONTRAST, ".jp-Notebook"))
                + figure_problems(page.evaluate(FIGURES, ".jp-Notebook")))
    finally:
        page.evaluate(SET_THEME, LIGHT)
        page.wait_for_timeout(500)
