"""``show_source(fn)``: the live source of a library function or class, highlighted in a notebook.

Notebooks never redefine the library; they show its source and then use it. The source is read from
the installed file (``inspect.getsource``), so what you see is what runs.
"""

from __future__ import annotations

import functools
import inspect
import textwrap


class Source(str):
    """A ``str`` holding source code; in a notebook it displays highlighted, once."""

    shown = False

    def _repr_html_(self) -> str:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        out = highlight(str(self), PythonLexer(), HtmlFormatter(noclasses=True, nobackground=False))
        # a light card in every theme: the colours are the light style's, and JupyterLab's dark theme would
        # otherwise paint the <pre> dark under them (blue on black)
        return out.replace('<pre style="', '<pre style="background: transparent; color: #1a1a1a; ', 1).replace(
            '<div class="highlight" style="', '<div class="highlight" style="padding: 2px 8px; border-radius: 4px; ', 1)

    def _ipython_display_(self) -> None:
        """As a cell's last value after ``show_source`` already displayed it: show nothing more."""
        if self.shown:
            return
        from IPython.display import HTML, display

        display(HTML(self._repr_html_()))

    def __repr__(self) -> str:
        return str(self)


def _unwrap(obj):
    """The function behind a ``partial`` (e.g. a ``bind`` result), a bound method, a decorator or a
    ``@triton.jit`` kernel (whose Python function is its ``.fn``)."""
    while isinstance(obj, functools.partial):
        obj = obj.func
    obj = getattr(obj, "__func__", obj)
    if not inspect.isroutine(obj) and not inspect.isclass(obj) and inspect.isfunction(getattr(obj, "fn", None)):
        obj = obj.fn
    return inspect.unwrap(obj)


def show_source(obj) -> Source:
    """Display the source of ``obj`` (a function, class, method, module, or a ``bind`` partial)
    highlighted in a notebook, or print it in plain Python, and return it as a string.

    >>> from rlnb.algos.kl import k1
    >>> src = show_source(k1)  # doctest: +ELLIPSIS
    @KL_ESTIMATORS.register("k1")
    def k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    ...
    >>> src.splitlines()[-1]
    '    return logp - ref_logp'
    """
    target = _unwrap(obj)
    try:
        src = inspect.getsource(target)
    except (TypeError, OSError):
        raise TypeError(f"obj: expected a function, class, method or module defined in Python source, "
                        f"got {getattr(obj, '__name__', obj)!r}") from None
    out = Source(textwrap.dedent(src))                                  # methods come indented
    if _in_ipython():
        from IPython.display import HTML, display

        display(HTML(out._repr_html_()))
    else:
        print(out)
    out.shown = True
    return out


def _in_ipython() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None
