// The classroom (DESIGN.md principle 14): the figure, its caption and the player on one screen,
// a presentation mode with a pointer and a pen, the presenter view's other half, the key list,
// the folded introduction.
//
// One screen: the player is as tall as the window below its top (--player-top, measured here;
// the CSS sizes the deck to what is left after the caption and the player bar).
// Presentation mode (?present=1 or p): figure, caption and player alone, full screen where the
// browser allows; PageDown/PageUp, → ←, space step (player.js); b blanks the screen (and the
// player's keys wait while it is blank); n opens the presenter view in a second window; l a
// pointer, d a pen (drawn over the figure, cleared at the next step or with c); Esc leaves.
// A small overlay keeps the scene's key parameter (body[data-key-slider]) at hand and moves it
// only over the stops the current state accepts (GET /<scene>/key-stops); a state refused
// anyway (from the address) shows its problems in large type, and the keys keep working.
(function () {
  "use strict";
  var html = document.documentElement;
  var wentFullscreen = false;

  // Written only when it changes: a new value restyles the whole page, and a slider's move
  // (a new stage, the same place) would pay for a second layout. Read in an animation frame
  // after a swap, the layout it needs is the one the frame makes anyway.
  var playerTop = null;
  function fit() {
    var player = document.querySelector("#stage [data-player]");
    if (!player || html.classList.contains("present")) return;
    var top = Math.round(player.getBoundingClientRect().top + window.scrollY) + "px";
    if (top === playerTop) return;
    playerTop = top;
    html.style.setProperty("--player-top", top);
  }

  function fitSoon() { requestAnimationFrame(fit); }

  function presenting() { return html.classList.contains("present"); }
  function site() { return document.body.classList.contains("site"); }

  function setAddress(present) {
    if (!site()) return;
    var url = new URL(window.location.href);
    if (present) url.searchParams.set("present", "1"); else url.searchParams.delete("present");
    window.history.replaceState(window.history.state, "", url);
  }

  function markKeyField() {
    var name = document.body.dataset.keySlider;
    var controls = document.getElementById("controls");
    if (!name || !controls) return;
    var field = controls.querySelector('[data-field="' + name + '"]');
    if (!field) return;
    field.classList.add("key-field");
    for (var el = field.parentElement; el && el !== controls; el = el.parentElement) el.classList.add("key-path");
    if (el && el.tagName === "DETAILS") el.open = true;
  }

  function present(on) {
    if (on === presenting()) return;
    html.classList.toggle("present", on);
    setAddress(on);
    if (on) {
      window.scrollTo(0, 0);
      Lecture.join();
      loadStops();
      if (document.fullscreenEnabled && !document.fullscreenElement) {
        // allowed only from a user's gesture (the p key, the Present button); ?present=1 on
        // load stays in the window
        try {
          var asked = html.requestFullscreen();
          if (asked && asked.then) asked.then(function () { wentFullscreen = true; }, function () {});
        } catch (e) { /* not allowed here */ }
      }
    } else {
      blank(false);
      Ink.tool(null);
      Ink.clear();
      if (document.fullscreenElement && wentFullscreen) document.exitFullscreen().catch(function () {});
      wentFullscreen = false;
      fit();
    }
  }

  function overlay(cls, build) {
    var el = document.querySelector("." + cls);
    if (!el) {
      el = document.createElement("div");
      el.className = cls;
      el.hidden = true;
      build(el);
      document.body.appendChild(el);
    }
    return el;
  }

  function blank(on) {
    var el = overlay("blank-screen", function (el) { el.setAttribute("aria-hidden", "true"); });
    el.hidden = on === undefined ? !el.hidden : !on;
  }

  function blanked() {
    var el = document.querySelector(".blank-screen");
    return !!el && !el.hidden;
  }

  var KEYS = [
    ["→  PageDown", "next step"], ["←  PageUp", "previous step"], ["space", "play / pause"],
    ["Home  End", "first / last step"], ["p", "presentation mode"], ["n", "presenter view (a second window)"],
    ["b  .", "blank the screen (presenting)"], ["l", "pointer (presenting)"],
    ["d", "pen: draw on the figure (presenting)"], ["c", "clear the pen's ink"],
    ["g", "predict, then reveal: each step waits for a guess"],
    ["Esc", "put the pen down, leave presentation mode"], ["?", "this list"],
    ["↑ ↓  (← → after Tab)", "move the slider that has the keyboard's focus"]];

  function help(on) {
    var el = overlay("key-help", function (el) {
      el.setAttribute("role", "dialog");
      el.setAttribute("aria-label", "Keys");
      var h = document.createElement("h2");
      h.textContent = "Keys (whenever no text field has focus)";
      el.appendChild(h);
      var dl = document.createElement("dl");
      KEYS.forEach(function (pair) {
        var dt = document.createElement("dt"), dd = document.createElement("dd");
        dt.textContent = pair[0]; dd.textContent = pair[1];
        dl.appendChild(dt); dl.appendChild(dd);
      });
      el.appendChild(dl);
      var close = document.createElement("button");
      close.type = "button"; close.className = "button"; close.textContent = "Close";
      close.addEventListener("click", function () { el.hidden = true; });
      el.appendChild(close);
    });
    el.hidden = on === undefined ? !el.hidden : !on;
  }

  // --- the presenter view: a second window of the same lecture ---------------------------
  // Both windows (this page and /<scene>/presenter, static/js/presenter.js) talk over one
  // BroadcastChannel per scene: a step taken in either is taken in the other. A page joins
  // when it presents or opens the presenter view; a state is the scene's canonical query, so a
  // window that shows another state does not follow steps of this one.
  var Lecture = (function () {
    var channel = null;
    function player() {
      var root = document.querySelector("#stage [data-player]");
      return root && root.__player ? root.__player : null;
    }
    function query() {
      var root = document.querySelector("#stage [data-player]");
      var embed = root ? root.getAttribute("data-embed") || "" : "";
      return embed.slice(embed.indexOf("?") + 1);
    }
    function send(kind, frame) {
      var p = player();
      if (frame === undefined) frame = p ? p.k : 0;
      if (channel) channel.postMessage({ kind: kind, frame: frame, query: query() });
    }
    function join() {
      if (channel || !site() || !window.BroadcastChannel) return;
      channel = new BroadcastChannel("shardscope-lecture:" + document.body.dataset.scene);
      channel.onmessage = function (event) {
        var m = event.data || {};
        if (m.kind === "hello") return send("state");
        if (m.kind === "blank") { if (presenting()) blank(); return; }
        var p = player();
        if ((m.kind === "frame" || m.kind === "state") && p && m.query === query() && m.frame !== p.k) {
          p.pause();
          p.show(m.frame, m.kind === "frame", "remote");
        }
        if (m.kind === "pointer") Ink.remotePointer(m.x, m.y);
      };
    }
    document.addEventListener("player:frame", function (event) {
      if (!channel || event.detail.remote) return;
      // a new state read (the key parameter moved) is sent whole: the presenter follows it
      // (a player made anew reads its deck before the page holds it: the event says the frame)
      send(event.detail.read ? "state" : "frame", event.detail.frame);
    });
    function open() {
      var p = player(), slug = document.body.dataset.scene;
      if (!p || !slug || !site()) return;
      join();
      var url = "/" + slug + "/presenter?" + query() + (p.k ? "&frame=" + p.k : "");
      window.open(url, "shardscope-presenter-" + slug, "popup=yes,width=1280,height=800");
    }
    return { join: join, open: open };
  })();

  // --- pointer and pen ----------------------------------------------------------------------
  // An <svg class="ink"> over the deck with the deck's own viewBox (and the same letterboxing),
  // so strokes are kept in the deck's units and stay on the figure when the window changes
  // size. The pen draws while the pointer is down; the pointer is a dot that follows it.
  var Ink = (function () {
    var NS = "http://www.w3.org/2000/svg";
    var current = null, stroke = null, dot = null, hideDot = null;

    function deck() { return document.querySelector("#stage [data-player] svg.deck"); }

    function layer() {
      var svg = deck();
      if (!svg) return null;
      var frame = svg.parentNode;
      var ink = frame.querySelector(":scope > svg.ink");
      if (!ink) {
        ink = document.createElementNS(NS, "svg");
        ink.setAttribute("class", "ink");
        ink.setAttribute("aria-hidden", "true");
        ink.setAttribute("viewBox", svg.getAttribute("viewBox"));
        var aspect = svg.getAttribute("preserveAspectRatio");
        if (aspect) ink.setAttribute("preserveAspectRatio", aspect);
        frame.appendChild(ink);
        ink.addEventListener("pointerdown", down);
        ink.addEventListener("pointermove", move);
        ink.addEventListener("pointerup", up);
        ink.addEventListener("pointercancel", up);
        ink.addEventListener("pointerleave", function () { if (current === "pointer" && dot) dot.setAttribute("display", "none"); });
      }
      ink.classList.toggle("pen", current === "pen");
      ink.classList.toggle("pointer", current === "pointer");
      return ink;
    }

    function at(ink, event) {
      var matrix = ink.getScreenCTM();
      if (!matrix) return null;
      var p = new DOMPoint(event.clientX, event.clientY).matrixTransform(matrix.inverse());
      return { x: Math.round(p.x * 10) / 10, y: Math.round(p.y * 10) / 10 };
    }

    function down(event) {
      if (current !== "pen") return;
      var ink = event.currentTarget, p = at(ink, event);
      if (!p) return;
      event.preventDefault();
      ink.setPointerCapture(event.pointerId);
      stroke = document.createElementNS(NS, "path");
      stroke.setAttribute("class", "stroke");
      stroke.setAttribute("d", "M" + p.x + " " + p.y);
      ink.appendChild(stroke);
    }

    function move(event) {
      var ink = event.currentTarget, p = at(ink, event);
      if (!p) return;
      if (current === "pointer") showDot(ink, p.x, p.y);
      if (current === "pen" && stroke) stroke.setAttribute("d", stroke.getAttribute("d") + " L" + p.x + " " + p.y);
    }

    function up() { stroke = null; }

    function showDot(ink, x, y) {
      if (!dot || dot.ownerSVGElement !== ink) {
        dot = document.createElementNS(NS, "circle");
        dot.setAttribute("class", "pointer-dot");
        dot.setAttribute("r", "11");
        ink.appendChild(dot);
      }
      dot.removeAttribute("display");
      dot.setAttribute("cx", x);
      dot.setAttribute("cy", y);
    }

    // the presenter view points for the lecturer: its dot shows here for a moment
    function remotePointer(x, y) {
      if (!presenting()) return;
      var ink = layer();
      if (!ink) return;
      showDot(ink, x, y);
      clearTimeout(hideDot);
      hideDot = setTimeout(function () { if (dot && current !== "pointer") dot.setAttribute("display", "none"); }, 1500);
    }

    function tool(which) {
      current = which === current ? null : which;
      html.classList.toggle("pen-on", current === "pen");
      html.classList.toggle("pointer-on", current === "pointer");
      var ink = layer();
      if (ink && current !== "pointer" && dot) dot.setAttribute("display", "none");
      document.querySelectorAll("[data-ink-tool]").forEach(function (b) {
        b.setAttribute("aria-pressed", String(b.dataset.inkTool === current));
      });
      return current;
    }

    function clear() {
      document.querySelectorAll("#stage svg.ink path.stroke").forEach(function (p) { p.remove(); });
      stroke = null;
    }

    document.addEventListener("player:frame", function (event) { if (!event.detail.read) clear(); });
    document.addEventListener("htmx:afterSettle", function () { if (current) layer(); });
    return { tool: tool, clear: clear, remotePointer: remotePointer, active: function () { return current; } };
  })();

  // --- the key parameter's overlay: only the stops the state accepts ------------------------
  var stops = null;            // {name, stops: ["2", "4", …]} of the state on screen, or null
  var stopsFor = null;         // the query they were asked for

  function keySlider() {
    var field = document.querySelector("#controls .key-field");
    return field ? field.querySelector('input[type="range"]') : null;
  }

  function loadStops() {
    var root = document.querySelector("#stage [data-player]");
    var slug = document.body.dataset.scene;
    if (!presenting() || !root || !slug) return;
    var embed = root.getAttribute("data-embed") || "";
    var query = embed.slice(embed.indexOf("?") + 1);
    if (query === stopsFor) return;
    stopsFor = query;
    stops = null;
    fetch("/" + slug + "/key-stops?" + query, { headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (answer) {
        if (stopsFor === query) stops = answer && answer.stops && answer.stops.length ? answer : null;
      }, function () { /* no stops: the overlay moves as on the page */ });
  }

  // the value a key slider's position stands for (a list slider's position indexes its list)
  function valueOf(slider, position) {
    if (slider.dataset.values) return slider.dataset.values.split(" ")[position];
    return String(position);
  }

  // the slider's positions whose values the state accepts, in order
  function validPositions(slider) {
    if (!stops) return null;
    var ok = new Set(stops.stops), out = [];
    var low = parseInt(slider.min, 10), high = parseInt(slider.max, 10);
    var step = parseInt(slider.step, 10) || 1;
    for (var p = low; p <= high; p += step) if (ok.has(valueOf(slider, p))) out.push(p);
    return out.length ? out : null;
  }

  function moveTo(slider, position) {
    if (String(position) === slider.value) return;
    slider.value = String(position);
    slider.dispatchEvent(new Event("input", { bubbles: true }));
  }

  var STOP_KEYS = { ArrowRight: 1, ArrowUp: 1, ArrowLeft: -1, ArrowDown: -1, Home: -Infinity, End: Infinity };

  // (capture, before player.js and the slider's own move)
  document.addEventListener("keydown", function (event) {
    var slider = keySlider();
    if (!presenting() || event.target !== slider || !(event.key in STOP_KEYS)) return;
    if (blanked()) return;
    var positions = validPositions(slider);
    if (!positions) return;
    event.preventDefault();
    event.stopImmediatePropagation();
    var now = parseInt(slider.value, 10), way = STOP_KEYS[event.key], next = null;
    if (way === -Infinity) next = positions[0];
    else if (way === Infinity) next = positions[positions.length - 1];
    else if (way > 0) next = positions.filter(function (p) { return p > now; })[0];
    else next = positions.filter(function (p) { return p < now; }).pop();
    if (next !== undefined && next !== null) moveTo(slider, next);
  }, true);

  // a drag lands on the nearest accepted stop (capture: before controls.js reads the value)
  document.addEventListener("input", function (event) {
    var slider = keySlider();
    if (!presenting() || event.target !== slider) return;
    var positions = validPositions(slider);
    if (!positions) return;
    var now = parseInt(slider.value, 10);
    var best = positions.reduce(function (a, b) { return Math.abs(b - now) < Math.abs(a - now) ? b : a; });
    if (best !== now) slider.value = String(best);
  }, true);

  // player.js asks first: true when the key was the classroom's
  function key(event) {
    if (document.querySelector("[data-presenter]")) return false;   // presenter.js has its own
    var on = presenting();
    var k = event.key;
    if (k === "?") { help(); return true; }
    if (k === "p" || k === "P") { present(!on); return true; }
    if (k === "n" || k === "N") { Lecture.open(); return true; }
    if (k === "Escape") {
      var keyHelp = document.querySelector(".key-help");
      if (keyHelp && !keyHelp.hidden) { help(false); return true; }
      if (blanked()) { blank(false); return true; }
      if (Ink.active()) { Ink.tool(null); return true; }
      if (on) { present(false); return true; }
      return false;
    }
    if (!on) return false;
    if (k === "b" || k === "B" || k === ".") { blank(); return true; }
    if (blanked()) return false;
    if (k === "l" || k === "L") { Ink.tool("pointer"); return true; }
    if (k === "d" || k === "D") { Ink.tool("pen"); return true; }
    if (k === "c" || k === "C") { Ink.clear(); return true; }
    return false;
  }

  document.addEventListener("fullscreenchange", function () {
    // Esc in full screen is the browser's: it leaves full screen, and so the mode
    if (!document.fullscreenElement && wentFullscreen) { wentFullscreen = false; present(false); }
  });
  document.addEventListener("click", function (event) {
    var target = event.target.closest ? event.target : null;
    if (!target) return;
    if (target.closest("[data-present-toggle]")) { present(!presenting()); return; }
    if (target.closest("[data-presenter-open]")) { event.preventDefault(); Lecture.open(); return; }
    var tool = target.closest("[data-ink-tool]");
    if (tool) { Ink.tool(tool.dataset.inkTool); return; }
    if (target.closest("[data-ink-clear]")) { Ink.clear(); return; }
    var lede = target.closest("[data-lede]");
    if (lede && !target.closest("a")) { lede.classList.toggle("folded"); fit(); }
  });
  // A listing may be wider than its panel and scroll sideways: each is reachable by the keyboard
  // (Tab, then the arrows) and named for a screen reader by its panel's heading. Attributes
  // only, written when the page is idle: measuring which listings overflow would lay out the
  // panels below the fold that a slider's move leaves alone.
  var reaching = null;
  function reachScrollers() {
    if (reaching) return;
    var run = function () {
      reaching = null;
      document.querySelectorAll("#stage pre:not([tabindex])").forEach(function (el) {
        el.setAttribute("tabindex", "0");
        el.setAttribute("role", "region");
        var panel = el.closest("section, .panel");
        var heading = panel && panel.querySelector("h2, h3");
        var listings = panel ? Array.prototype.slice.call(panel.querySelectorAll("pre")) : [el];
        var name = heading ? heading.textContent.trim() + ": " : "";
        el.setAttribute("aria-label", name + "listing" + (listings.length > 1 ? " " + (listings.indexOf(el) + 1) : ""));
      });
    };
    reaching = window.requestIdleCallback ? window.requestIdleCallback(run, { timeout: 2000 }) : setTimeout(run, 500);
  }

  document.addEventListener("DOMContentLoaded", function () {
    markKeyField();
    reachScrollers();
    fit();
    if (presenting()) { Lecture.join(); loadStops(); }
  });
  window.addEventListener("load", fit);
  window.addEventListener("resize", fit);
  document.addEventListener("htmx:afterSettle", function (event) {
    fitSoon();
    loadStops();
    if (event.target && event.target.id === "stage") reachScrollers();
  });

  window.ShardscopeClassroom = {
    key: key, present: present, blank: blank, blanked: blanked, help: help, fit: fit,
    ink: Ink, openPresenter: Lecture.open
  };
})();
