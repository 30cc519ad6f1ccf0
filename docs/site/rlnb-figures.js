// Draws the course website's figures. Each notebook figure arrives as <div class="rlnb-figure"
// data-rlnb-figure="{json}"> (rlnb.viz.site): plotly JSON without a template. It is drawn with the plotly.js this
// site serves (assets/plotly.min.js: no CDN, so the site works offline) in the template of the page's scheme
// (mkdocs-material sets data-md-color-scheme="slate" on <body> for dark), and redrawn when the reader flips it.
(function () {
  "use strict";

  function scheme() {
    return document.body.getAttribute("data-md-color-scheme") === "slate" ? "dark" : "light";
  }

  function draw(el) {
    var fig;
    try {
      fig = JSON.parse(el.getAttribute("data-rlnb-figure"));
    } catch (err) {
      el.textContent = "figure data unreadable: " + err;
      return;
    }
    var which = scheme();
    var layout = Object.assign({}, fig.layout || {}, { template: window.RLNB_TEMPLATES[which] });
    window.Plotly.react(el, fig.data || [], layout, { responsive: true, displaylogo: false }).then(function () {
      el.setAttribute("data-rlnb-drawn", which);  // the browser test waits for this, per scheme
    });
  }

  function drawAll() {
    document.querySelectorAll(".rlnb-figure").forEach(draw);
  }

  function start() {
    drawAll();
    var last = scheme();
    new MutationObserver(function () {
      if (scheme() !== last) {
        last = scheme();
        drawAll();
      }
    }).observe(document.body, { attributes: true, attributeFilter: ["data-md-color-scheme"] });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
