"""Text a learner cannot read in the dark theme: colours hard-coded for a white page (white on a pink row, grey on
black). Read from the page after JupyterLab switched to its dark theme, figures excluded (plotly draws its own).

The contrast ratio is WCAG's, (L1 + 0.05) / (L2 + 0.05) of the relative luminances of the text's colour and of the
first opaque background behind it; below ``MIN_CONTRAST`` (WCAG's floor for large text) the text is reported.
"""

from __future__ import annotations

MIN_CONTRAST = 3.0
DARK, LIGHT = "JupyterLab Dark", "JupyterLab Light"

SET_THEME = "async (name) => { await window.jupyterapp.commands.execute('apputils:change-theme', {theme: name}); }"

# (rootSelector) => Array<{cell, text, ratio}>: each output element with text whose contrast is below 3
CONTRAST = r"""
(rootSelector) => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const root = (panel && panel.content && panel.content.node) || document.querySelector(rootSelector) || document;
  const rgba = (s) => { const m = /rgba?\(([^)]+)\)/.exec(s || '');
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const lum = ([r, g, b]) => { const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const background = (el) => { for (let e = el; e; e = e.parentElement) {
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
    """Switch JupyterLab to its dark theme, read the contrast of every output's text, switch back."""
    page.evaluate(SET_THEME, DARK)
    try:
        # JupyterLab marks the body once the dark theme's stylesheet applies
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=20_000)
    except Exception:  # noqa: BLE001  (playwright's TimeoutError)
        return ["the page did not switch to JupyterLab's dark theme within 20 s: its contrast was not checked"]
    try:
        page.wait_for_timeout(500)  # widgets restyle
        return contrast_problems(page.evaluate(CONTRAST, ".jp-Notebook"))
    finally:
        page.evaluate(SET_THEME, LIGHT)
        page.wait_for_timeout(500)
