// Predict, then reveal (issue 25): with predict mode on, every new step of a scene's player
// stays hidden — the deck's layer for that step, its caption, the result panels, the hint above
// the deck — until the room has guessed. Where the scene declares what the step computes
// (app/exercises/predict.py, GET /api/predict/<scene>?<query>) the guess is typed in and the
// reveal says how far off it was; elsewhere Enter (or →) reveals. Keys: g toggles predict mode,
// Enter or → reveals, ← steps back; presentation mode shows the prompt in large type.
(function () {
  "use strict";
  var on = false;
  var questions = {};        // frame → {question, value, unit}
  var revealed = 0;          // the highest frame shown
  var pending = null;        // the frame waiting for its reveal
  var prompt = null;         // the prompt's element, inside the player

  function player() {
    var api = window.ShardscopePlayer;
    return api ? api.active() : null;
  }

  function predictUrl(root) {
    var svg = root && root.dataset.svg;            // /svg/<slug>?<query>
    return svg ? svg.replace(/^\/svg\//, "/api/predict/") : null;
  }

  function load(root) {
    questions = {};
    var url = predictUrl(root);
    if (!url) return;
    fetch(url, { headers: { "Accept": "application/json" } }).then(function (r) {
      return r.ok ? r.json() : { questions: [] };
    }).then(function (body) {
      questions = {};
      (body.questions || []).forEach(function (q) { questions[q.frame] = q; });
      if (pending !== null) ask(pending);
    }).catch(function () { /* no questions: steps are still hidden until revealed */ });
  }

  function groups(root, k) {
    return root.querySelectorAll('svg.deck g.frame[data-frame="' + k + '"]');
  }

  function hide(root, k) {
    groups(root, k).forEach(function (g) { g.setAttribute("display", "none"); });
    root.querySelectorAll('[data-captions] > li[data-frame="' + k + '"]').forEach(function (li) {
      li.hidden = true;
    });
  }

  function unhide(root, k) {
    groups(root, k).forEach(function (g) { g.removeAttribute("display"); });
    root.querySelectorAll('[data-captions] > li[data-frame="' + k + '"]').forEach(function (li) {
      li.hidden = false;
    });
  }

  function format(x) {
    var a = Math.abs(x);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return x.toPrecision(4);
    return String(Math.round(x * 1e4) / 1e4);
  }

  function box(root) {
    if (prompt && root.contains(prompt)) return prompt;
    prompt = document.createElement("div");
    prompt.className = "predict-prompt";
    prompt.setAttribute("role", "status");
    // in the caption's place: the caption of a hidden step is hidden too, the figure stays whole
    var captions = root.querySelector("[data-captions]");
    if (captions) captions.insertAdjacentElement("afterend", prompt);
    else (root.querySelector(".deck-frame") || root).appendChild(prompt);
    return prompt;
  }

  // the question for step k: typed in where the scene declares one
  function ask(k) {
    var p = player();
    if (!p) return;
    var el = box(p.root);
    el.innerHTML = "";
    el.hidden = false;
    var q = questions[k];
    var head = document.createElement("p");
    head.className = "predict-question";
    // the player's count: frame k is step k + 1 (steps are counted from 1 wherever they are read)
    head.textContent = "Step " + (k + 1) + " — " + (q ? q.question : "what will it show?");
    el.appendChild(head);
    var row = document.createElement("p");
    row.className = "predict-row";
    if (q) {
      var input = document.createElement("input");
      input.type = "text";
      input.className = "predict-guess";
      input.setAttribute("aria-label", "Your prediction" + (q.unit ? " in " + q.unit : ""));
      input.setAttribute("inputmode", "decimal");
      input.placeholder = "your guess" + (q.unit ? " (" + q.unit + ")" : "");
      input.addEventListener("keydown", function (event) {
        if (event.key === "Enter") { event.preventDefault(); event.stopPropagation(); reveal(); }
        if (event.key === "Escape") { input.blur(); }
      });
      row.appendChild(input);
    }
    var button = document.createElement("button");
    button.type = "button";
    button.className = "button primary";
    button.textContent = "Reveal";
    button.addEventListener("click", function () { reveal(); });
    row.appendChild(button);
    var hint = document.createElement("span");
    hint.className = "predict-keys";
    hint.textContent = q ? "Enter reveals" : "Enter or → reveals";
    row.appendChild(hint);
    el.appendChild(row);
  }

  function reveal() {
    var p = player();
    if (!p || pending === null) return;
    var k = pending;
    var q = questions[k];
    var input = prompt && prompt.querySelector(".predict-guess");
    var guess = input ? parseFloat((input.value || "").replace(/[,\s]/g, "").replace("−", "-")) : NaN;
    unhide(p.root, k);
    revealed = Math.max(revealed, k);
    pending = null;
    document.documentElement.classList.remove("predict-pending");
    document.documentElement.classList.toggle("predict-done", revealed >= p.frames - 1);
    if (!prompt) return;
    prompt.innerHTML = "";
    if (!q) { prompt.hidden = true; return; }
    var line = document.createElement("p");
    line.className = "predict-answer";
    var text = "It is " + format(q.value) + (q.unit ? " " + q.unit : "");
    if (!isNaN(guess)) {
      var off = q.value === 0 ? Math.abs(guess) : Math.abs(guess - q.value) / Math.abs(q.value);
      var close = off <= 0.05;
      line.classList.add(close ? "close" : "far");
      text += " — you said " + format(guess) + (close ? ": within 5 %. " : ", off by " +
        (off >= 10 ? "more than 10×" : Math.round(off * 100) + " %") + ".");
    }
    line.textContent = text;
    prompt.appendChild(line);
  }

  // a new step on screen: beyond what was revealed, it waits for the room
  function onFrame(event) {
    if (!on) return;
    var p = player();
    var root = event.target.closest ? event.target.closest("[data-player]") : null;
    if (!p || !root || root !== p.root) return;
    var k = event.detail.frame;
    if (k > revealed) {
      pending = k;
      document.documentElement.classList.add("predict-pending");
      for (var j = revealed + 1; j <= k; j++) hide(root, j);
      if (p.playing()) p.pause();
      ask(k);
    } else {
      pending = null;
      document.documentElement.classList.remove("predict-pending");
      if (prompt) prompt.hidden = true;
    }
  }

  function set(value) {
    on = value;
    var html = document.documentElement;
    html.classList.toggle("predicting", on);
    document.querySelectorAll("[data-predict-toggle]").forEach(function (b) {
      b.setAttribute("aria-pressed", on ? "true" : "false");
    });
    var p = player();
    if (!p) return;
    if (on) {
      revealed = p.k;                 // what is on screen stays; the next step waits
      pending = null;
      html.classList.toggle("predict-done", revealed >= p.frames - 1);
      load(p.root);
    } else {
      if (pending !== null) unhide(p.root, pending);
      pending = null;
      html.classList.remove("predict-pending");
      if (prompt) prompt.hidden = true;
      html.classList.remove("predict-done");
      p.show(p.k, false);
    }
  }

  // player.js asks before it steps forward: a hidden step is revealed first
  function holds(p) { return on && pending !== null && p && p.k === pending; }

  document.addEventListener("player:frame", onFrame);
  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("[data-predict-toggle]")) set(!on);
  });
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    var api = window.ShardscopePlayer;
    if (api && api.isTextField(event.target)) return;
    if (event.key === "g" || event.key === "G") { event.preventDefault(); set(!on); }
    else if (event.key === "Enter" && on && pending !== null &&
             !(event.target.closest && event.target.closest("button, a, select, summary"))) {
      event.preventDefault();
      reveal();
    }
  });
  // a new stage (a slider moved): its steps start from what is on screen
  document.addEventListener("htmx:afterSwap", function () {
    if (!on) return;
    var p = player();
    if (p) { revealed = p.k; pending = null; if (prompt) prompt.hidden = true; load(p.root); }
  });
  document.addEventListener("DOMContentLoaded", function () {
    if (new URLSearchParams(window.location.search).get("predict") === "1") set(true);
  });

  window.ShardscopePredict = { holds: holds, reveal: function () { reveal(); }, set: set,
                               on: function () { return on; } };
})();
