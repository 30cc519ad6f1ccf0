// The site opened from file:// (a USB stick, no server): Chromium refuses `new Worker(url)` there, and
// mkdocs-material runs its search in a worker, so the search threw and the page's other scripts (the light/dark
// toggle) died with it. Loaded before the theme's bundle, on file:// only: a Worker stand-in that runs the worker's
// script in a hidden same-origin iframe and passes the messages both ways. The bundle reads the search index from
// search/search_index.js there (written by scripts/build_site.py), not with a fetch that file:// blocks.
(function () {
  "use strict";
  if (location.protocol !== "file:") return;

  class FrameWorker extends EventTarget {
    constructor(url) {
      super();
      this.pending = [];
      const frame = document.createElement("iframe");
      frame.hidden = true;
      frame.setAttribute("aria-hidden", "true");
      frame.className = "rlnb-file-worker";
      (document.body || document.documentElement).appendChild(frame);
      this.frame = frame.contentWindow;
      // the worker's postMessage(reply) is this object's "message" event, as from a real worker
      this.frame.postMessage = (data) => this.dispatchEvent(new MessageEvent("message", { data: data }));
      const script = this.frame.document.createElement("script");
      script.src = new URL(url, location.href).href;
      script.onload = () => {
        const queued = this.pending;
        this.pending = null;
        queued.forEach((data) => this.deliver(data));
      };
      script.onerror = () => this.dispatchEvent(new Event("error"));
      this.frame.document.head.appendChild(script);
    }

    deliver(data) {
      this.frame.dispatchEvent(new MessageEvent("message", { data: data }));
    }

    postMessage(data) {
      if (this.pending) this.pending.push(data);  // the worker's script is still loading
      else this.deliver(data);
    }

    terminate() {
      this.pending = [];
    }
  }

  window.Worker = FrameWorker;
})();
