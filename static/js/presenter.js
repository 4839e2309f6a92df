// The presenter view (templates/presenter.html): the current step (the scene's embed, its player
// the one this window drives), the next step's preview, the caption as speaker notes, a timer
// and the step list, in step with the presenting window both ways.
//
// Every change of step, wherever it starts — a key or a click here, the current frame's own
// player bar, a message from the presenting window — goes through the current frame's player,
// whose "player:frame" event then updates the rest of this view and, unless the step came
// from the other window, tells it (BroadcastChannel "shardscope-lecture:<slug>", the same as
// static/js/classroom.js). A state (the scene's query) the other window moves to is followed:
// the view reloads at it, its timer kept (sessionStorage).
(function () {
  "use strict";
  var view, slug, query, frames, channel = null;
  var current = null, next = null;          // the two frames' players
  var pointing = false;

  function player(frame) {
    try {
      var root = frame.contentDocument && frame.contentDocument.querySelector("[data-player]");
      return root && root.__player ? root.__player : null;
    } catch (e) { return null; }
  }

  function send(message) {
    if (channel) { message.query = query; channel.postMessage(message); }
  }

  // --- what follows the current step -------------------------------------------------------
  function shown(k, remote) {
    view.dataset.current = String(k);
    view.querySelector("[data-pv-step]").textContent = String(k + 1);
    var unit = current ? current.unit(k) : "";
    view.querySelector("[data-pv-unit]").textContent = unit ? " · " + unit : "";
    view.querySelectorAll("[data-pv-notes] > li").forEach(function (li) {
      li.hidden = parseInt(li.dataset.frame, 10) !== k;
    });
    view.querySelectorAll("[data-go]").forEach(function (b) {
      if (parseInt(b.dataset.go, 10) === k) {
        b.setAttribute("aria-current", "step");
        // the list scrolls to it, not the window (on a phone the list is part of the page)
        var list = b.closest("ol"), top = b.offsetTop;
        if (top < list.scrollTop || top + b.offsetHeight > list.scrollTop + list.clientHeight) {
          list.scrollTop = Math.max(0, top - list.clientHeight / 3);
        }
      } else b.removeAttribute("aria-current");
    });
    var last = k + 1 >= frames;
    view.querySelector("[data-pv-next-label]").textContent = last ? "the end" : "step " + (k + 2);
    view.querySelector(".pv-next").classList.toggle("at-end", last);
    if (next) next.show(Math.min(k + 1, frames - 1), false, "read");
    var url = new URL(window.location.href);
    if (k) url.searchParams.set("frame", String(k)); else url.searchParams.delete("frame");
    window.history.replaceState(null, "", url);
    if (!remote) send({ kind: "frame", frame: k });
  }

  function go(k) {
    if (!current) return;
    current.pause();
    current.show(k, k === current.k + 1);
  }

  // --- the two frames ------------------------------------------------------------------------
  function hookCurrent(frame) {
    current = player(frame);
    if (!current) return;
    var doc = frame.contentDocument;
    doc.addEventListener("player:frame", function (event) {
      if (!event.detail.read) shown(event.detail.frame, event.detail.remote);
    });
    // the clicker's keys while the frame has the focus are its player's; a few are this view's
    doc.addEventListener("keydown", function (event) { if (ownKey(event)) event.preventDefault(); }, true);
    doc.addEventListener("pointermove", pointerMove, true);
    // the step list learns what each step is from the deck (its frames' data-unit)
    view.querySelectorAll("[data-go]").forEach(function (b) {
      var unit = current.unit(parseInt(b.dataset.go, 10));
      var holder = b.querySelector("[data-pv-step-unit]");
      if (holder) holder.textContent = unit ? unit + " — " : "";
    });
    shown(current.k, true);
    send({ kind: "hello" });
  }

  function hookNext(frame) {
    next = player(frame);
    if (next) next.show(Math.min(parseInt(view.dataset.current, 10) + 1, frames - 1), false, "read");
  }

  function whenLoaded(frame, then) {
    var done = false;
    function ready() {
      if (done || !player(frame)) return;
      done = true;
      then(frame);
    }
    frame.addEventListener("load", ready);
    ready();
  }

  // --- pointing at the audience's screen (l) ----------------------------------------------------
  var pending = null;
  function pointerMove(event) {
    if (!pointing) return;
    var svg = event.target.closest && event.target.closest("svg.deck");
    var matrix = svg && svg.getScreenCTM();
    if (!matrix) return;
    var p = new DOMPoint(event.clientX, event.clientY).matrixTransform(matrix.inverse());
    if (pending === null) {
      requestAnimationFrame(function () { send(pending); pending = null; });
    }
    pending = { kind: "pointer", x: Math.round(p.x), y: Math.round(p.y) };
  }

  // --- the timer ------------------------------------------------------------------------------
  var STORE = "shardscope-presenter-timer";
  var timer = (function () {
    var saved = null;
    try { saved = JSON.parse(sessionStorage.getItem(STORE) || "null"); } catch (e) { saved = null; }
    return saved || { start: Date.now(), pausedAt: null };
  })();

  function save() { try { sessionStorage.setItem(STORE, JSON.stringify(timer)); } catch (e) { /* private mode */ } }

  function clock(seconds) {
    var h = Math.floor(seconds / 3600), m = Math.floor(seconds / 60) % 60, s = seconds % 60;
    var mm = h ? String(m).padStart(2, "0") : String(m);
    return (h ? h + ":" : "") + mm + ":" + String(s).padStart(2, "0");
  }

  function tick() {
    var now = timer.pausedAt || Date.now();
    view.querySelector("[data-pv-elapsed]").textContent = clock(Math.max(0, Math.floor((now - timer.start) / 1000)));
    var d = new Date();
    view.querySelector("[data-pv-clock]").textContent =
      String(d.getHours()).padStart(2, "0") + ":" + String(d.getMinutes()).padStart(2, "0");
    var toggle = view.querySelector('[data-pv-timer="toggle"]');
    toggle.textContent = timer.pausedAt ? "Resume" : "Pause";
    toggle.setAttribute("aria-pressed", String(!!timer.pausedAt));
  }

  function pause() {
    if (timer.pausedAt) { timer.start += Date.now() - timer.pausedAt; timer.pausedAt = null; }
    else timer.pausedAt = Date.now();
    save(); tick();
  }

  function reset() {
    timer = { start: Date.now(), pausedAt: timer.pausedAt ? Date.now() : null };
    save(); tick();
  }

  // --- keys: a clicker's (PageUp/PageDown, arrows, space) and this view's own -----------------------
  var STEPS = { ArrowRight: 1, ArrowDown: 1, PageDown: 1, ArrowLeft: -1, ArrowUp: -1, PageUp: -1 };

  // a key this view handles whichever document has the focus: true when it did
  function ownKey(event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return false;
    var k = event.key;
    if (k === "b" || k === "B" || k === ".") { send({ kind: "blank" }); return true; }
    if (k === "t" || k === "T") { pause(); return true; }
    if (k === "r" || k === "R") { reset(); return true; }
    if (k === "l" || k === "L") {
      pointing = !pointing;
      view.classList.toggle("pointing", pointing);
      return true;
    }
    return false;
  }

  function onKey(event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    var tag = event.target && event.target.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") return;
    var handled = ownKey(event);
    if (!handled && current) {
      if (event.key in STEPS) { go(current.k + STEPS[event.key]); handled = true; }
      else if (event.key === "Home") { go(0); handled = true; }
      else if (event.key === "End") { go(frames - 1); handled = true; }
      else if (event.key === " " && tag !== "BUTTON") { current.act("play"); handled = true; }
    }
    if (handled) { event.preventDefault(); event.stopImmediatePropagation(); }
  }

  function init() {
    view = document.querySelector("[data-presenter]");
    if (!view) return;
    slug = view.dataset.slug;
    query = view.dataset.query;
    frames = parseInt(view.dataset.frames, 10);
    // before the page's own key handlers (player.js, classroom.js listen on the document)
    window.addEventListener("keydown", onKey, true);
    view.addEventListener("click", function (event) {
      var step = event.target.closest("[data-go]");
      if (step) { go(parseInt(step.dataset.go, 10)); return; }
      var t = event.target.closest("[data-pv-timer]");
      if (t) { if (t.dataset.pvTimer === "toggle") pause(); else reset(); }
    });
    if (window.BroadcastChannel) {
      channel = new BroadcastChannel("shardscope-lecture:" + slug);
      channel.onmessage = function (event) {
        var m = event.data || {};
        if (m.kind !== "frame" && m.kind !== "state") return;
        view.querySelector("[data-pv-link]").textContent = "In step with the presenting window.";
        if (m.query !== query) {
          // the presenting window moved to another state: follow it, where it is
          var theme = new URLSearchParams(window.location.search).get("theme");
          window.location.replace("/" + slug + "/presenter?" + m.query + (m.frame ? "&frame=" + m.frame : "") +
                                  (theme ? "&theme=" + encodeURIComponent(theme) : ""));
          return;
        }
        if (current && m.frame !== current.k) { current.pause(); current.show(m.frame, m.kind === "frame", "remote"); }
      };
    }
    whenLoaded(view.querySelector("[data-pv-current]"), hookCurrent);
    whenLoaded(view.querySelector("[data-pv-next]"), hookNext);
    save();
    tick();
    setInterval(tick, 1000);
  }

  document.addEventListener("DOMContentLoaded", init);
  window.ShardscopePresenter = { go: go, current: function () { return current; } };
})();
