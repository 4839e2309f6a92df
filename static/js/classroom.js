// The classroom (DESIGN.md principle 14): the figure, its caption and the player on one screen,
// a presentation mode, the key list, the folded introduction.
//
// One screen: the player is as tall as the window below its top (--player-top, measured here;
// the CSS sizes the deck to what is left after the caption and the player bar).
// Presentation mode (?present=1 or p): figure, caption and player alone, full screen where the
// browser allows; PageDown/PageUp, → ←, space step (player.js); b blanks the screen; Esc leaves.
// A small overlay keeps the scene's key parameter (body[data-key-slider]) at hand.
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

  function setAddress(present) {
    if (!document.body.classList.contains("site")) return;
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
    if (on === html.classList.contains("present")) return;
    html.classList.toggle("present", on);
    setAddress(on);
    if (on) {
      window.scrollTo(0, 0);
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

  var KEYS = [
    ["→  PageDown", "next step"], ["←  PageUp", "previous step"], ["space", "play / pause"],
    ["Home  End", "first / last step"], ["p", "presentation mode"], ["b", "blank the screen (presenting)"],
    ["Esc", "leave presentation mode"], ["g", "predict, then reveal: each step waits for a guess"],
    ["?", "this list"],
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

  // player.js asks first: true when the key was the classroom's
  function key(event) {
    var presenting = html.classList.contains("present");
    if (event.key === "?") { help(); return true; }
    if (event.key === "p" || event.key === "P") { present(!presenting); return true; }
    if (event.key === "Escape") {
      var keyHelp = document.querySelector(".key-help");
      if (keyHelp && !keyHelp.hidden) { help(false); return true; }
      var screen = document.querySelector(".blank-screen");
      if (screen && !screen.hidden) { blank(false); return true; }
      if (presenting) { present(false); return true; }
      return false;
    }
    if ((event.key === "b" || event.key === "B" || event.key === ".") && presenting) { blank(); return true; }
    return false;
  }

  document.addEventListener("fullscreenchange", function () {
    // Esc in full screen is the browser's: it leaves full screen, and so the mode
    if (!document.fullscreenElement && wentFullscreen) { wentFullscreen = false; present(false); }
  });
  document.addEventListener("click", function (event) {
    var toggle = event.target.closest && event.target.closest("[data-present-toggle]");
    if (toggle) { present(!html.classList.contains("present")); return; }
    var lede = event.target.closest && event.target.closest("[data-lede]");
    if (lede && !event.target.closest("a")) { lede.classList.toggle("folded"); fit(); }
  });
  document.addEventListener("DOMContentLoaded", function () { markKeyField(); fit(); });
  window.addEventListener("load", fit);
  window.addEventListener("resize", fit);
  document.addEventListener("htmx:afterSettle", fitSoon);

  window.ShardscopeClassroom = { key: key, present: present, blank: blank, help: help, fit: fit };
})();
