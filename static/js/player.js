// The frame player: play, pause, step, scrub, speed, keyboard; animates what moves in a step.
//
// A deck is an <svg class="deck"> whose <g class="frame" data-frame="k"> groups are layers:
// frame 0 holds the starting state, frame k what step k changed. Showing groups 0…k shows the
// state after step k. The current group also shows its arrows (class "only-current").
// Changed cells carry data-dx/data-dy, the offset of the cell their data came from: they fly in
// from there. Every player re-initialises after an htmx swap.
//
// Steps count from 1 wherever they are read: frame k (the URL's frame=k, from 0) is "step k+1
// of N". An embed's ?start=&end= (frames, from 0) bound the steps it walks, and its position
// reads "of end+1". Each step change is announced to screen readers (the [data-announce] live
// region) and the deck's text alternative follows it: its name says the step, its description
// holds the caption and the values drawn (written when the browser is idle).
(function () {
  "use strict";
  var BASE_MS = 1400;                       // one step at 1× speed
  var reduceMotion = window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches;
  var active = null;                        // the player the keyboard drives
  var PIECE = /\ue000(\d+)\ue001/g;          // a shared piece's number in a later layer's text

  function Player(root) {
    this.root = root;
    this.timer = null;
    this.animations = [];
    var self = this;
    // delegated to the root: stage.js keeps the player bar on screen from one state to the next
    // (its links and numbers brought up to date), and the player then reads its deck again
    root.addEventListener("click", function (event) {
      var button = event.target.closest && event.target.closest("[data-act]");
      if (button && root.contains(button)) self.act(button.dataset.act);
    });
    root.addEventListener("input", function (event) {
      if (event.target !== self.scrub) return;
      self.pause();
      self.show(parseInt(self.scrub.value, 10), false);
    });
    root.addEventListener("pointerdown", function () { active = self; });
    root.addEventListener("focusin", function () { active = self; });
    this.read();
  }

  // What the root holds now: its deck's layers, captions and player bar, the frame to show.
  Player.prototype.read = function () {
    var root = this.root;
    this.pause();
    this.animations.forEach(function (a) { a.cancel(); });
    this.animations = [];
    this.frames = parseInt(root.dataset.frames, 10);
    this.groups = Array.prototype.slice.call(root.querySelectorAll("svg.deck g.frame"));
    // frames after the first one shown wait, inert and as text, in a template until needed
    var later = root.querySelector("template.deck-later");
    this.later = later ? Array.prototype.slice.call(later.content.querySelectorAll("g.frame")) : [];
    // the parts several later layers repeat, written once (app/draw/deck.py, later_frames)
    var listed = later && later.content.firstElementChild;
    this.pieces = listed && listed.hasAttribute("data-pieces") ?
      listed.getAttribute("data-pieces").split("\ue002") : [];
    var pieces = this.pieces;
    this.piece = function (_, k) { return pieces[+k]; };
    this.holder = root.querySelector("svg.deck g.frames");
    this.captions = Array.prototype.slice.call(root.querySelectorAll("[data-captions] > li"));
    this.scrub = root.querySelector("[data-scrub]");
    this.position = root.querySelector("[data-player-bar] [data-k]");  // not a deck's own data-k
    this.speedSelect = root.querySelector("[data-speed]");
    this.playButton = root.querySelector('[data-act="play"]');
    this.k = parseInt(root.dataset.current || "0", 10);
    // a lecturer's embed may show a range of steps (?start=&end=) and play itself (?autoplay=1)
    var query = new URLSearchParams(window.location.search);
    var bound = function (name, fallback) {
      var v = parseInt(query.get(name), 10);
      return isNaN(v) ? fallback : Math.max(0, Math.min(this.frames - 1, v));
    }.bind(this);
    this.lo = bound("start", 0);
    this.hi = Math.max(this.lo, bound("end", this.frames - 1));
    this.announcer = root.querySelector("[data-announce]");
    this.svg = root.querySelector("svg.deck");
    if (this.svg && !this.svg.hasAttribute("data-title")) {
      this.svg.setAttribute("data-title", this.svg.getAttribute("aria-label") || "");
    }
    if (query.has("start") && !query.has("frame")) this.k = this.lo;
    if (this.speedSelect && query.get("speed")) {
      var wanted = query.get("speed");
      Array.prototype.forEach.call(this.speedSelect.options, function (o) { if (o.value === wanted) o.selected = true; });
    }
    if (this.scrub) {
      this.scrub.min = String(this.lo);
      this.scrub.max = String(this.hi);
    }
    this.show(this.k, false, "read");
    if (query.get("autoplay") === "1") this.play();
  };

  // whether the root's deck is another than the one read (a stage kept, its deck swapped)
  Player.prototype.stale = function () {
    return this.holder !== this.root.querySelector("svg.deck g.frames");
  };

  Player.prototype.speed = function () {
    return this.speedSelect ? parseFloat(this.speedSelect.value) || 1 : 1;
  };

  Player.prototype.act = function (what) {
    // predict mode (static/js/predict.js): a step still hidden is revealed before stepping on
    var predict = window.ShardscopePredict;
    if (what === "next" && predict && predict.holds(this)) return predict.reveal();
    if (what === "play") return this.playing() ? this.pause() : this.play();
    this.pause();
    if (what === "first") this.show(this.lo, false);
    if (what === "last") this.show(this.hi, false);
    if (what === "prev") this.show(this.k - 1, false);
    if (what === "next") this.show(this.k + 1, true);
  };

  Player.prototype.playing = function () { return this.timer !== null; };

  Player.prototype.play = function () {
    var self = this;
    if (this.k >= this.hi) this.show(this.lo, false);
    this.root.classList.add("playing");
    if (this.playButton) this.playButton.setAttribute("aria-label", "Pause");
    var tick = function () {
      if (self.k >= self.hi) return self.pause();
      self.show(self.k + 1, true);
      if (window.ShardscopePredict && window.ShardscopePredict.holds(self)) return self.pause();
      self.timer = window.setTimeout(tick, BASE_MS / self.speed());
    };
    this.timer = window.setTimeout(tick, 250);
  };

  Player.prototype.pause = function () {
    if (this.timer !== null) window.clearTimeout(this.timer);
    this.timer = null;
    this.root.classList.remove("playing");
    if (this.playButton) this.playButton.setAttribute("aria-label", "Play");
  };

  Player.prototype.load = function (k) {
    while (this.groups.length <= k && this.later.length) {
      var group = this.later.shift();
      this.holder.appendChild(group);  // adopted from the template: moved, not copied
      group = this.holder.lastElementChild;
      // a later layer carries its elements as text (app/draw/svg.py, lazy_layer): make them
      var markup = group.getAttribute("data-markup");
      if (markup !== null) {
        group.removeAttribute("data-markup");
        if (this.pieces.length) markup = markup.replace(PIECE, this.piece);
        group.insertAdjacentHTML("afterbegin", markup);
      }
      this.groups.push(group);
    }
  };

  // `how`: "read" (the deck was just read: nothing announced), "remote" (another window of the
  // same lecture moved: announced, not sent back), otherwise a step of this window's own.
  Player.prototype.show = function (k, animate, how) {
    k = Math.max(this.lo, Math.min(this.hi, k));
    this.k = k;
    this.load(k);
    this.animations.forEach(function (a) { a.cancel(); });
    this.animations = [];
    this.groups.forEach(function (g) {
      var index = parseInt(g.dataset.frame, 10);
      if (index > k) g.setAttribute("display", "none"); else g.removeAttribute("display");
      g.classList.toggle("current", index === k);
    });
    this.captions.forEach(function (li) { li.hidden = parseInt(li.dataset.frame, 10) !== k; });
    var said = this.said(k);
    if (this.scrub) {
      this.scrub.value = String(k);
      this.scrub.setAttribute("aria-valuetext", said);
    }
    if (this.position) this.showPosition(k);
    this.describe(k, said);
    if (how !== "read" && this.announcer) {
      var caption = this.caption(k);
      this.announcer.textContent = said + "." + (caption ? " " + caption : "");
    }
    this.updateLinks(k);
    if (animate && !reduceMotion) this.animate(k);
    this.root.dispatchEvent(new CustomEvent("player:frame", {
      detail: { frame: k, remote: how === "remote", read: how === "read" }, bubbles: true }));
  };

  // the unit of frame k, as its deck names it ("ledger line 3 of 5: optimizer")
  Player.prototype.unit = function (k) {
    var group = this.groups[k];
    if (group) return group.getAttribute("data-unit") || "";
    var later = this.later[k - this.groups.length];
    return later ? later.getAttribute("data-unit") || "" : "";
  };

  Player.prototype.caption = function (k) {
    var li = this.captions[k];
    return li ? li.textContent.trim() : "";
  };

  // "step 3 of 8: MoE layer stage 2 of 7" (of the range's last step on an embed with ?end=)
  Player.prototype.said = function (k) {
    var unit = this.unit(k);
    return "Step " + (k + 1) + " of " + (this.hi + 1) + (unit ? ": " + unit : "");
  };

  // The deck's text alternative: its name says the step, its description (a hidden element the
  // svg points at) the step's caption at once and every value the step shows once the browser is
  // idle (a deck holds up to a few thousand labels; a slider's move must not wait for them). The
  // description never speaks of another step than the name: the caption is replaced with the step.
  Player.prototype.describe = function (k, said) {
    var svg = this.svg;
    if (!svg) return;
    svg.setAttribute("aria-label", (svg.getAttribute("data-title") || "Figure") + ". " + said);
    var holder = this.root.querySelector(":scope > [data-deck-values]");
    if (!holder) {
      holder = document.createElement("p");
      holder.hidden = true;
      holder.setAttribute("data-deck-values", "");
      holder.id = "deck-values-" + (++describedCount);
      this.root.appendChild(holder);
    }
    svg.setAttribute("aria-describedby", holder.id);
    var caption = this.caption(k);
    holder.textContent = caption;
    var self = this;
    if (this.describing) cancelIdle(this.describing);
    this.describing = whenIdle(function () {
      self.describing = null;
      if (self.k !== k || !document.contains(svg)) return;
      var values = shownTexts(svg);
      holder.textContent = caption + (values.length ? " Values shown: " + values.join("; ") + "." : "");
    });
  };

  var describedCount = 0;
  function whenIdle(fn) {
    return window.requestIdleCallback ? { idle: window.requestIdleCallback(fn, { timeout: 1500 }) }
                                      : { timer: window.setTimeout(fn, 200) };
  }
  function cancelIdle(handle) {
    if (handle.idle !== undefined) window.cancelIdleCallback(handle.idle);
    else window.clearTimeout(handle.timer);
  }

  // The labels a sighted viewer sees on the deck now, in document order, each once: the leaves
  // of its <text> elements (a text of several <tspan> labels gives each), leaving out the
  // layers not shown yet and the arrows of steps no longer current.
  function shownTexts(svg) {
    var out = [], seen = new Set();
    function add(text) {
      text = text.replace(/\s+/g, " ").trim();
      if (text && !seen.has(text)) { seen.add(text); out.push(text); }
    }
    svg.querySelectorAll("text").forEach(function (t) {
      if (t.closest('[display="none"]')) return;
      var onlyCurrent = t.closest(".only-current");
      if (onlyCurrent && !onlyCurrent.closest(".frame.current")) return;
      var spans = t.querySelectorAll("tspan");
      if (spans.length) spans.forEach(function (span) { add(span.textContent); });
      else add(t.textContent);
    });
    return out;
  }

  // "step k+1 of N", then what a step is in this scene (the frame's data-unit, written by its
  // deck: "optimizer step 2 of 3 · update", "t = 12.3 ms", "forward · layer 4 of 12")
  Player.prototype.showPosition = function (k) {
    this.position.textContent = String(k + 1);
    var holder = this.position.parentNode;
    var of = holder.querySelector("[data-of]");
    if (of && of.textContent !== String(this.hi + 1)) of.textContent = String(this.hi + 1);
    var unit = holder.querySelector("[data-unit-text]");
    var text = this.unit(k);
    if (!unit && text) {
      unit = document.createElement("span");
      unit.className = "unit-text";
      unit.setAttribute("data-unit-text", "");
      holder.appendChild(unit);
    }
    if (unit) unit.textContent = text ? " · " + text : "";
  };

  // Download link, embed snippet and the address bar all point at the frame on screen.
  Player.prototype.updateLinks = function (k) {
    var svg = this.root.dataset.svg;
    var link = document.querySelector("[data-svg-link]");
    if (svg && link) link.setAttribute("href", svg + "&frame=" + k);
    if (this.root.closest("#stage") || document.body.classList.contains("embed")) {
      var url = new URL(window.location.href);
      var now = url.searchParams.get("frame") || "0";
      if (now === String(k)) return;  // a history update costs a few ms: only when it changes
      if (k === 0) url.searchParams.delete("frame"); else url.searchParams.set("frame", String(k));
      window.history.replaceState(window.history.state, "", url);
    }
  };

  Player.prototype.animate = function (k) {
    var group = this.groups[k];
    if (!group || !group.animate) return;
    var duration = Math.min(900, 0.6 * BASE_MS / this.speed());
    var self = this;
    group.querySelectorAll("[data-dx]").forEach(function (cell) {
      var dx = parseFloat(cell.dataset.dx), dy = parseFloat(cell.dataset.dy);
      self.animations.push(cell.animate(
        [{ transform: "translate(" + dx + "px," + dy + "px)", opacity: 0.35 },
         { transform: "translate(0px,0px)", opacity: 1 }],
        { duration: duration, easing: "cubic-bezier(.3,.7,.3,1)" }));
    });
    group.querySelectorAll(".arrows .arrow").forEach(function (arrow) {
      var path = arrow.querySelector("path");
      if (!path || !path.getTotalLength) return;
      var length = path.getTotalLength();
      // the shaft grows from sender to receiver, then the head lands
      if (!path.getAttribute("stroke-dasharray")) {
        self.animations.push(path.animate(
          [{ strokeDasharray: length + " " + length, strokeDashoffset: length },
           { strokeDasharray: length + " " + length, strokeDashoffset: 0 }],
          { duration: duration, easing: "ease-out" }));
      }
      var head = arrow.querySelector("polygon");
      if (head) self.animations.push(head.animate([{ opacity: 0 }, { opacity: 0, offset: 0.8 }, { opacity: 1 }], { duration: duration }));
    });
  };

  function init(scope) {
    (scope || document).querySelectorAll("[data-player]").forEach(function (root) {
      if (root.__player) {
        if (root.__player.stale()) root.__player.read();
        return;
      }
      root.__player = new Player(root);
      if (!active || !document.contains(active.root)) active = root.__player;
    });
  }

  // Keys work whenever no text field has focus: a focused chip, select or button does not keep
  // ← → for itself (a clicked chip, then →, must step, not change the parameter). A focused
  // slider keeps ← → Home End: that is how it is moved by keyboard.
  var TEXT_TYPES = { text: 1, number: 1, search: 1, email: 1, url: 1, password: 1, tel: 1 };
  function isTextField(el) {
    if (!el || !el.tagName) return false;
    if (el.isContentEditable || el.tagName === "TEXTAREA") return true;
    return el.tagName === "INPUT" && !!TEXT_TYPES[(el.getAttribute("type") || "text").toLowerCase()];
  }

  // How the focus last moved: a pointer (a click, a drag) or the keyboard (Tab). Chromium's
  // :focus-visible cannot tell: any key pressed makes the focused element match it.
  var focusedBy = null;
  document.addEventListener("pointerdown", function () { focusedBy = "pointer"; }, true);
  document.addEventListener("keydown", function (event) {
    if (event.key === "Tab") focusedBy = "keyboard";
  }, true);

  var STEP_KEYS = { ArrowLeft: "prev", ArrowRight: "next", PageUp: "prev", PageDown: "next", Home: "first", End: "last" };

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    var target = event.target;
    if (isTextField(target)) return;
    if (document.querySelector("dialog[open]")) return;
    // the classroom's keys (p, b, n, ?, Esc, the pen…) work even where the stage shows no player
    // (a state the params refuse shows its problems instead)
    var classroom = window.ShardscopeClassroom;
    if (classroom && classroom.key(event)) { event.preventDefault(); return; }
    // a blanked screen hides the player: its keys must not move it unseen
    if (classroom && classroom.blanked && classroom.blanked() &&
        (STEP_KEYS[event.key] || event.key === " ")) { event.preventDefault(); return; }
    if (!active || !document.contains(active.root)) return;
    var tag = target && target.tagName;
    if (STEP_KEYS[event.key]) {
      // A slider reached with the keyboard (Tab) keeps its arrow keys, so it
      // can be moved without a mouse; one a mouse or finger let go of does not (a lecturer
      // drags, then steps with →). PageUp/PageDown, a clicker's keys, step the player even there.
      if (tag === "INPUT" && target.type === "range" && event.key.indexOf("Page") !== 0 &&
          focusedBy !== "pointer") return;
      event.preventDefault();
      if (tag === "SELECT" || (tag === "INPUT" && target.type !== "range")) target.blur();
      active.act(STEP_KEYS[event.key]);
    } else if (event.key === " " && tag !== "BUTTON" && tag !== "A" && tag !== "SELECT" && tag !== "SUMMARY" && tag !== "INPUT") {
      event.preventDefault();
      active.act("play");
    }
  }, true);

  document.addEventListener("DOMContentLoaded", function () { init(document); });
  document.addEventListener("htmx:load", function (event) { init(event.detail.elt); });
  window.ShardscopePlayer = {
    init: init, isTextField: isTextField,
    active: function () { return active && document.contains(active.root) ? active : null; }
  };
})();
