// rlnb's live figure in the page (the front end of rlnb/viz/plotview.py's PlotView).
//
// The protocol holds no message timing: the kernel sets the whole figure (`figure`, JSON without the template),
// the template (`template`, JSON, sent again only when the theme changes) and a counter (`version`) in one state
// update. The widget model always holds the newest state, so a view that renders late, a second view of the same
// figure and a reloaded page all draw what the kernel last sent. A view draws the newest version it has, one draw
// at a time: updates that arrive while it draws are coalesced into the next draw, so a slow browser skips stale
// frames instead of falling behind.
//
// Hooks for tests and scripts (never wording): `data-rlnb-state` on the element ("loading", "drawn", "behind",
// "error"), `data-rlnb-version` (the version on screen) and `data-rlnb-latest` (the newest version the model holds).

const SLOT = "__rlnbPlotly";          // one per page: plotly.js, handed over by the PlotlyJS model
const BEHIND_MS = 1000;               // a figure this long behind its model says so
const LOAD_WARN_MS = 20000;           // plotly.js not there after this long: say what to do
const CONFIG = { responsive: true, displaylogo: false, editSelection: false };

function slot() {
  if (!globalThis[SLOT]) {
    let resolve;
    const promise = new Promise((r) => { resolve = r; });
    globalThis[SLOT] = { promise, resolve, Plotly: null, loading: false };
  }
  return globalThis[SLOT];
}

// Ask the widget manager for the model that carries plotly.js: creating it runs its initialize, which fills the
// slot. It exists already in every normal case; this only makes the order of model creation not matter.
function requestLibrary(model) {
  const ref = model.get("lib");
  const id = typeof ref === "string" && ref.startsWith("IPY_MODEL_") ? ref.slice("IPY_MODEL_".length) : null;
  if (id && model.widget_manager && model.widget_manager.get_model) {
    Promise.resolve(model.widget_manager.get_model(id)).catch(() => {});
  }
}

// anywidget (0.11) makes each model wait for its module before it handles any message from the kernel, and gives
// up after 2 s: from then on `_handle_comm_msg` awaits a rejected promise and drops every message to that model, so
// its figure stays as it was. On a busy laptop that was the empty axes (plotly's FigureWidget has a 5 MB module).
// Mended once per page, for every anywidget: a message whose wait failed is handled by ipywidgets' own handler, in
// the order it came. The failure itself is then harmless, and is reported as a warning instead of a page error.
const FAILED = "Failed to initialize model";

function quietFailures() {
  if (globalThis.__rlnbQuiet) return;
  globalThis.__rlnbQuiet = true;
  globalThis.addEventListener("unhandledrejection", (event) => {
    if (globalThis.__rlnbMended && String(event.reason).includes(FAILED)) {
      event.preventDefault();
      console.warn("rlnb: a widget's module took over 2 s to load (a busy machine); its updates are still applied");
    }
  });
}
quietFailures();

function ownHandler(proto) {
  while (proto && !Object.prototype.hasOwnProperty.call(proto, "_handle_comm_msg")) proto = Object.getPrototypeOf(proto);
  return proto;
}

async function mendAnywidget(model) {
  if (globalThis.__rlnbMended || !model.widget_manager || !model.widget_manager.get_model) return;
  const ref = model.get("lib");  // any real anywidget model will do: the one carrying plotly.js
  const id = typeof ref === "string" && ref.startsWith("IPY_MODEL_") ? ref.slice("IPY_MODEL_".length) : null;
  let real = null;
  try { real = id && await model.widget_manager.get_model(id); } catch (err) { return; }
  const anywidgetProto = real && ownHandler(Object.getPrototypeOf(real));
  const widgetProto = anywidgetProto && ownHandler(Object.getPrototypeOf(anywidgetProto));
  if (globalThis.__rlnbMended || !widgetProto) return;
  const waitFirst = anywidgetProto._handle_comm_msg, handle = widgetProto._handle_comm_msg;
  anywidgetProto._handle_comm_msg = function (msg) {
    return Promise.resolve(waitFirst.call(this, msg)).catch((err) => {
      if (!String(err).includes(FAILED)) throw err;
      return handle.call(this, msg);
    });
  };
  globalThis.__rlnbMended = true;
  rebindAll(model.widget_manager, anywidgetProto);
}

// ipywidgets binds a model's message handler once, when the model is created (`comm.on_msg(this._handle_comm_msg
// .bind(this))`), so the mend above reaches only models created after it. Every model that already exists (all of
// them after a reload, and the page's first figure, whose own module ran the mend) is bound again here.
function rebindAll(manager, anywidgetProto) {
  for (const pending of Object.values(manager._models || {})) {
    Promise.resolve(pending).then((m) => {
      if (m && m.comm && typeof m.comm.on_msg === "function" && anywidgetProto.isPrototypeOf(m)) {
        m.comm.on_msg(m._handle_comm_msg.bind(m));
      }
    }).catch(() => {});
  }
}

// Ask the kernel for the model's state again, once the mend is in: anything sent before it may have been dropped.
function resync(model) {
  mendAnywidget(model).catch(() => {}).finally(() => {
    try { model.send({ type: "sync" }); } catch (err) { /* closed: nothing to ask */ }
  });
}

const TYPED = { f8: Float64Array, f4: Float32Array, i4: Int32Array, u4: Uint32Array, i2: Int16Array,
                u2: Uint16Array, i1: Int8Array, u1: Uint8Array, u1c: Uint8ClampedArray };

// plotly.py writes numpy arrays as {dtype, bdata (base64), shape}; plotly.js draws them but keeps them encoded in
// `gd.data`, where readers (hover, tests, scripts) expect arrays. Decoded once here into plain arrays.
function decode(value) {
  if (Array.isArray(value)) return value.map(decode);
  if (!value || typeof value !== "object") return value;
  if (typeof value.bdata === "string" && TYPED[value.dtype]) {
    const bytes = Uint8Array.from(atob(value.bdata), (c) => c.charCodeAt(0));
    const flat = Array.from(new TYPED[value.dtype](bytes.buffer));
    const shape = String(value.shape || "").split(",").map((n) => parseInt(n, 10)).filter((n) => n > 0);
    if (shape.length !== 2) return flat;
    return Array.from({ length: shape[0] }, (_, i) => flat.slice(i * shape[1], (i + 1) * shape[1]));
  }
  const out = {};
  for (const [k, v] of Object.entries(value)) out[k] = decode(v);
  return out;
}

function parse(text, fallback) {
  if (!text) return fallback;
  try { return decode(JSON.parse(text)); } catch (err) { console.error("rlnb: bad figure JSON", err); return fallback; }
}

function render({ model, el }) {
  el.classList.add("rlnb-plotview");
  const note = document.createElement("div");
  note.className = "rlnb-plot-note";
  const plot = document.createElement("div");
  plot.className = "rlnb-plot";
  el.append(note, plot);

  let Plotly = null, alive = true, drawing = false, again = false, behindTimer = null;
  const state = (name, text) => {
    el.dataset.rlnbState = name;
    note.textContent = text || "";
    note.style.display = text ? "" : "none";
  };

  const draw = async () => {
    if (!Plotly || !alive) return;
    if (drawing) { again = true; return; }
    drawing = true;
    try {
      do {
        again = false;
        const version = model.get("version");
        const fig = parse(model.get("figure"), {});
        const layout = Object.assign({}, fig.layout || {}, { autosize: true });
        delete layout.width;                                    // the figure fills its box
        const template = parse(model.get("template"), null);
        if (template) layout.template = template;
        await Plotly.react(plot, fig.data || [], layout, CONFIG);
        el.dataset.rlnbVersion = String(version);
        if (model.get("version") !== version) again = true;    // newer state arrived while drawing
      } while (again && alive);
      state("drawn");
    } catch (err) {
      console.error("rlnb: the figure could not be drawn", err);
      state("error", `The figure could not be drawn (${err}). Re-run the cell.`);
    } finally {
      drawing = false;
    }
  };

  const changed = () => {
    el.dataset.rlnbLatest = String(model.get("version"));
    draw();
    clearTimeout(behindTimer);
    behindTimer = setTimeout(() => {
      if (alive && Plotly && el.dataset.rlnbVersion !== String(model.get("version"))) {
        state("behind", "Catching up with the kernel...");
      }
    }, BEHIND_MS);
  };

  const resize = new ResizeObserver(() => {
    if (Plotly && plot.data && plot.offsetWidth > 0) Plotly.Plots.resize(plot);
  });
  resize.observe(el);

  el.dataset.rlnbLatest = String(model.get("version"));
  state("loading", "Loading the figure...");
  const waiting = setTimeout(() => {
    if (!Plotly) state("loading", "The figure's library has not loaded yet. If this stays, reload the page.");
  }, LOAD_WARN_MS);
  const lib = slot();
  if (lib.Plotly) Plotly = lib.Plotly;
  else requestLibrary(model);
  // "reveal": the kernel asks to bring the figure's widget into view (a run started from a later cell, or by
  // Run All, which leaves the learner at the last cell while the figure trains above)
  const message = (msg) => {
    if (msg && msg.type === "reveal" && el.isConnected) {
      (el.closest(".rlnb-widget") || el).scrollIntoView({ block: "nearest", behavior: "smooth" });
    }
  };
  model.on("change:version", changed);
  model.on("msg:custom", message);
  resync(model);  // a new view (a reload, a second display) starts from the kernel's state
  lib.promise.then((P) => {
    clearTimeout(waiting);
    Plotly = P;
    draw();
  });

  return () => {
    alive = false;
    clearTimeout(waiting);
    clearTimeout(behindTimer);
    resize.disconnect();
    model.off("change:version", changed);
    model.off("msg:custom", message);
    if (Plotly) Plotly.purge(plot);
  };
}

// The model is made: ask the kernel for its state again (an update sent while the page was still making the model
// can be lost; the kernel answers with what it holds now, which the views then draw). Nothing here may wait:
// anywidget gives a model 2 s to load and initialize.
function initialize({ model }) {
  resync(model);
}

export default { initialize, render };
