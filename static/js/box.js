// Decks laid out for the box they are shown in (issue 27; app/draw/box.py, docs/legibility.md).
//
// A deck that lays out for its box says which box it was drawn for: <svg class="deck"
// data-box="920x400" data-font="1">. This script measures the deck's frame, rounds each side
// down to a bucket (a multiple of the step, within the range: <meta name="shardscope-box">
// carries them, written once in app/draw/box.py) and, when the deck was drawn for another
// bucket or type scale, fetches the same state drawn for this one and swaps the deck in
// (the player stays on its step). A deck may stay on a bucket one step smaller than its frame
// (it is then scaled up a little; down by 1 % at most), so a frame that wobbles by a few pixels does
// not lay the deck out again.
//
// First paint: the server draws a page for a default box and an embed for its aspect's
// (app/view.py); until this script has checked, <html class="box-pending"> (view.js) keeps the
// decks unseen, so a deck swapped for its own bucket never flashes the other layout first. A
// resize (the window, presentation mode, a phone turned) lays the deck out again. The scene's
// form carries box and font as hidden inputs, so every state it asks for — a slider's move, a
// state fetched ahead (stage.js keeps them by URL) — comes drawn for this box; the address bar
// leaves the box out.
//
// A− / A+ (the player bar, or the keys - and +) step the type scale (app/draw/box.py FONTS):
// the deck is laid out again with larger type, so fewer labels fit; the choice is remembered
// per browser, like the theme; ?font= in the address sets it for that page.
(function () {
  "use strict";
  var html = document.documentElement;
  var KEY = "shardscope-font";
  var WAIT_MS = 3000;       // the longest a deck stays unseen while its box is fetched
  var RESIZE_MS = 150;      // a resize lays out again once it has rested this long
  var meta = document.querySelector('meta[name="shardscope-box"]');
  var config = null;
  try { config = meta ? JSON.parse(meta.getAttribute("content")) : null; } catch (e) { config = null; }
  var pending = 0;          // relayouts in flight

  function bucket(length, range) {
    return Math.max(range[0], Math.min(range[1], Math.floor(length / config.step) * config.step));
  }

  // whether a deck drawn `drawn` units along a side may stay in a frame `length` px along it
  function keeps(drawn, length, range) {
    var want = bucket(length, range);
    return drawn === want || drawn === want - config.step ||
      (drawn === want + config.step && drawn <= length * 1.01);
  }

  function urlFont() {
    var v = parseFloat(new URLSearchParams(window.location.search).get("font"));
    return isNaN(v) ? null : v;
  }

  function storedFont() {
    try { var v = parseFloat(localStorage.getItem(KEY)); return isNaN(v) ? null : v; }
    catch (e) { return null; }
  }

  function snap(v) {
    var best = config.fonts[0];
    config.fonts.forEach(function (f) { if (Math.abs(f - v) < Math.abs(best - v)) best = f; });
    return best;
  }

  var fontChosen = null;    // the scale chosen on this page (A−/A+), else the address's or stored
  function font() {
    var v = fontChosen !== null ? fontChosen : urlFont();
    if (v === null) v = storedFont();
    return snap(v === null ? 1 : v);
  }

  function deckOf(root) { return root.querySelector(".deck-frame > svg.deck[data-box]"); }

  // the box the deck of `root` should be drawn for, or null when the one it has will do
  function wanted(root) {
    var svg = deckOf(root);
    var frame = svg && svg.parentNode;
    if (!frame || !frame.clientWidth) return null;
    var w = frame.clientWidth, h = frame.clientHeight;
    var drawn = svg.dataset.box.split("x").map(Number);
    var f = font();
    if (keeps(drawn[0], w, config.width) && keeps(drawn[1], h, config.height) &&
        parseFloat(svg.dataset.font) === f) return null;
    return {key: bucket(w, config.width) + "x" + bucket(h, config.height), font: f};
  }

  // The scene's form asks for every state drawn for this box (its hidden inputs, written by
  // templates/_partials/scene_page.html); the default type scale is left out of the URLs.
  function setForm(box) {
    var form = document.getElementById("controls");
    if (!form) return;
    var b = form.querySelector('input[name="box"]'), f = form.querySelector('input[name="font"]');
    if (b) b.value = box.key;
    if (f) { f.value = String(box.font); f.disabled = box.font === 1; }
  }

  function viewQuery(box) {
    return "box=" + box.key + (box.font !== 1 ? "&font=" + box.font : "");
  }

  // the same state's deck, drawn for `box`, swapped into `root`'s frame
  function relayout(root, box) {
    var want = box.key + "/" + box.font;
    if (root.__box === want) return Promise.resolve();
    root.__box = want;
    setForm(box);
    var url = root.dataset.embed;
    if (!url) return Promise.resolve();
    pending++;
    return fetch(url + (url.indexOf("?") < 0 ? "?" : "&") + viewQuery(box),
                 {credentials: "same-origin"})
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (text) {
        if (!text || !root.isConnected || root.__box !== want) return;
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.querySelector("[data-player] .deck-frame");
        var frame = root.querySelector(".deck-frame");
        if (!fresh || !frame) return;
        var player = root.__player;
        if (player) root.dataset.current = String(player.k);
        frame.replaceChildren.apply(frame, Array.from(fresh.childNodes).map(
          function (node) { return document.adoptNode(node); }));
        if (player) player.read();
        root.dispatchEvent(new CustomEvent("box:laid-out", {bubbles: true, detail: box}));
      })
      .catch(function () { /* offline (an exported file): the deck stays as drawn */ })
      .then(function () {
        if (root.__box === want) root.__box = null;
        pending--;
        if (!pending) reveal();
      });
  }

  function check(root) {
    var box = wanted(root);
    return box ? relayout(root, box) : Promise.resolve();
  }

  function reveal() { html.classList.remove("box-pending"); }

  // a frame's size changes: the window, presentation mode, a phone turned
  var timers = new Map();
  var sizes = "ResizeObserver" in window && new ResizeObserver(function (entries) {
    entries.forEach(function (entry) {
      var root = entry.target.closest("[data-player]");
      if (!root) return;
      clearTimeout(timers.get(root));
      timers.set(root, setTimeout(function () { timers.delete(root); check(root); }, RESIZE_MS));
    });
  });

  // Each deck frame is watched once; `now`: checked at once too (the first paint, a font step).
  // A stage swapped in by a slider's move is only watched: the observer's first report comes
  // with the layout the browser makes for that frame anyway (asking for the frame's size at
  // the swap would lay the new stage out once more, in the middle of the move).
  var watched = new Set();   // frames observed (those a swap took away are let go)
  function watch(scope, now) {
    watched.forEach(function (frame) {
      if (!frame.isConnected) { sizes.unobserve(frame); watched.delete(frame); }
    });
    (scope || document).querySelectorAll("[data-player]").forEach(function (root) {
      var svg = deckOf(root);
      if (!svg) return;
      var frame = svg.parentNode;
      if (sizes && !watched.has(frame)) { watched.add(frame); sizes.observe(frame); }
      if (now || !sizes) check(root);
    });
  }

  function step(delta) {
    var now = font();
    var k = config.fonts.indexOf(now) + delta;
    if (k < 0 || k >= config.fonts.length) return;
    fontChosen = config.fonts[k];
    try { localStorage.setItem(KEY, String(fontChosen)); } catch (e) { /* private mode */ }
    if (urlFont() !== null) {  // the address keeps saying what is shown
      var url = new URL(window.location.href);
      url.searchParams.set("font", String(fontChosen));
      window.history.replaceState(window.history.state, "", url);
    }
    watch(document, true);
  }

  // the address bar leaves the box out (a link copied from it is drawn for its reader's box)
  function address(url) {
    var u = new URL(url, window.location.href);
    u.searchParams.delete("box");
    return u.pathname + u.search + u.hash;
  }

  // an offline file (app/export/html.py forbids every request) keeps the deck it was drawn with
  var csp = document.querySelector('meta[http-equiv="Content-Security-Policy"]');
  var offline = !!csp && /connect-src 'none'/.test(csp.getAttribute("content") || "");
  if (!config || offline) {
    if (offline) html.classList.add("box-offline");
    reveal();
    return;
  }
  document.addEventListener("DOMContentLoaded", function () {
    watch(document, true);
    if (!pending) reveal();
    setTimeout(reveal, WAIT_MS);
  });
  document.addEventListener("htmx:load", function (event) { watch(event.detail.elt); });
  document.addEventListener("htmx:beforeHistoryUpdate", function (event) {
    var history = event.detail && event.detail.history;
    if (history && history.path) history.path = address(history.path);
  });
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-font-step]");
    if (button) step(parseInt(button.dataset.fontStep, 10));
  });
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || event.defaultPrevented) return;
    var player = window.ShardscopePlayer;
    if (player && player.isTextField(event.target)) return;
    if (document.querySelector("dialog[open]")) return;
    if (event.key === "+" || event.key === "=") { step(1); event.preventDefault(); }
    else if (event.key === "-" || event.key === "_") { step(-1); event.preventDefault(); }
  });

  window.ShardscopeBox = {
    address: address, font: font, step: step,
    settled: function () { return !pending && !html.classList.contains("box-pending"); }
  };
})();
