// Typesets the course's equations with the MathJax 2 the site serves itself (assets/mathjax, copied at build
// time from the jupyter-server-mathjax package: no CDN, so equations render offline too). Notebook markdown
// writes $...$ and $$...$$; markdown pages arrive as \(...\) and \[...\] (pymdownx.arithmatex).
(function () {
  "use strict";
  var here = document.currentScript.src;
  window.MathJax = {
    tex2jax: { inlineMath: [["$", "$"], ["\\(", "\\)"]], displayMath: [["$$", "$$"], ["\\[", "\\]"]],
               processEscapes: true, ignoreClass: "highlight|rlnb-figure" },
    // the package ships the STIX-Web fonts only (as Jupyter Notebook's MathJax did): never look for TeX fonts
    "HTML-CSS": { availableFonts: [], webFont: "STIX-Web", imageFont: null, preferredFont: null },
    SVG: { font: "STIX-Web" },
    showMathMenu: false,
    messageStyle: "none",
  };
  var script = document.createElement("script");
  script.src = here.replace(/rlnb-math\.js(\?.*)?$/, "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full");
  document.head.appendChild(script);
})();
