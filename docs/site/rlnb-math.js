// Typesets the course's equations with the MathJax 2 the site serves itself (assets/mathjax, copied at build
// time from the jupyter-server-mathjax package: no CDN, so equations render offline too). Notebook markdown
// writes $...$ and $$...$$; markdown pages arrive as \(...\) and \[...\] (pymdownx.arithmatex).
(function () {
  "use strict";
  var here = document.currentScript.src;
  // Fonts MathJax names that the package does not ship, each a failed request (the two 404s of issue 41, and more
  // on a page that uses them): HTML-CSS's "MathJax_Blank" (its source is about:blank) and the TeX fonts of the
  // hidden MathML copy screen readers read (NativeMML's styles, through AssistiveMML). Looked up on the machine
  // instead (local()): no request; the visible equations use the STIX-Web fonts the site serves.
  var hidden = {};
  [["Caligraphic", ""], ["Caligraphic", "bold"], ["AMS", ""], ["Script", ""], ["Fraktur", ""], ["Fraktur", "bold"]]
    .forEach(function (font, i) {
      var face = { "font-family": "MathJax_" + font[0] + "-WEB", src: "local('MathJax_" + font[0] + "')" };
      if (font[1]) face["font-weight"] = font[1];
      hidden["@font-face /*" + (i + 1) + "*/"] = face;  // the keys NativeMML declares them under
    });
  window.MathJax = {
    tex2jax: { inlineMath: [["$", "$"], ["\\(", "\\)"]], displayMath: [["$$", "$$"], ["\\[", "\\]"]],
               processEscapes: true, ignoreClass: "highlight|rlnb-figure" },
    // the package ships the STIX-Web fonts only (as Jupyter Notebook's MathJax did): never look for TeX fonts
    "HTML-CSS": { availableFonts: [], webFont: "STIX-Web", imageFont: null, preferredFont: null,
                  styles: { "@font-face": { "font-family": "MathJax_Blank", src: "local('MathJax_Blank')" } } },
    NativeMML: { styles: hidden },
    SVG: { font: "STIX-Web" },
    showMathMenu: false,
    messageStyle: "none",
  };
  var script = document.createElement("script");
  script.src = here.replace(/rlnb-math\.js(\?.*)?$/, "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full");
  document.head.appendChild(script);
})();
