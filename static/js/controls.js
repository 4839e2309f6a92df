// Scene controls: live readouts, keeping dependent controls valid before htmx sends the form,
// highlighting the parameters the server rejected. (The embed dialog: static/js/share.js.)
//
// Dependent controls are declared in the markup, so every scene gets them for free:
//   data-multiple-of="field"          this slider moves in steps of another field's value …
//   data-when="field=a|b field=c"     … while every such condition holds (else in steps of 1)
//   data-min="n"                      its lowest value in steps of 1 (min is the rendered one)
//   data-max-world                    this slider's maximum is the rank count − 1 (a root rank)
//   data-ops="op op …"                this radio only makes sense for those ops
//   data-show-for="op op …"           this block only shows for those ops
//   data-show-when="field"            … or for those values of another control (default "op");
//                                     a hidden block's inputs are disabled (not sent)
//   data-show-above="field n"         this block only shows while that number is above n
//   data-log2-for="name"              this slider moves log₂ of the hidden input "name"
//   data-values="1 2 4 …" data-target="name"   a range input that picks from a list: its
//                                     position indexes the list, the value goes to the hidden
//                                     input `name` (a slider over 1 … 1024 that stays precise)
//   <option data-fill='{"f": v, …}'>  choosing it empties fields f and shows v as placeholders
//   <form data-drop-empty>             empty fields are left out of the request and the URL
(function () {
  "use strict";

  // (form.elements would rebuild its collection after every swap; a selector does not)
  function value(form, name) {
    var el = form.querySelector('input[name="' + name + '"]:checked, select[name="' + name +
      '"], input[name="' + name + '"]:not([type="radio"])');
    return el ? el.value : null;
  }

  function setOutput(input) {
    var out = (input.form || document).querySelector('output[data-for="' + input.name + '"]');
    if (out) out.textContent = input.value;
  }

  // 2^x, rounded to three significant digits so that the URL stays readable
  function pow2(x) {
    var v = Math.pow(2, x);
    return String(parseFloat(v.toPrecision(3)));
  }

  function syncLog2(slider) {
    var hidden = slider.form && slider.form.elements[slider.dataset.log2For];
    if (!hidden) return;
    hidden.value = pow2(parseFloat(slider.value));
    setOutput(hidden);
  }

  // A list slider moved: copy the chosen value into its hidden input.
  function pickFromList(slider) {
    var values = slider.dataset.values.split(" ");
    var form = slider.form;
    var target = form && form.elements[slider.dataset.target];
    if (!target) return;
    target.value = values[Math.max(0, Math.min(values.length - 1, parseInt(slider.value, 10)))];
    setOutput(target);
  }

  function fixDependents(form) {
    var op = value(form, "op");
    var world = parseInt(value(form, "world"), 10);
    form.querySelectorAll("[data-max-world]").forEach(function (slider) {
      if (!world) return;
      slider.max = String(world - 1);
      if (parseInt(slider.value, 10) > world - 1) slider.value = String(world - 1);
      setOutput(slider);
    });
    var fallback = null;
    form.querySelectorAll("input[data-ops]").forEach(function (radio) {
      var ok = radio.dataset.ops.split(" ").indexOf(op) >= 0;
      radio.disabled = !ok;
      if (ok && !fallback) fallback = radio;
    });
    var checked = form.querySelector("input[data-ops]:checked");
    if ((!checked || checked.disabled) && fallback) fallback.checked = true;
    form.querySelectorAll("[data-show-for]").forEach(function (block) {
      var current = block.dataset.showWhen ? value(form, block.dataset.showWhen) : op;
      showBlock(block, block.dataset.showFor.split(" ").indexOf(current) >= 0);
    });
    form.querySelectorAll("[data-show-above]").forEach(function (block) {
      var spec = block.dataset.showAbove.split(" ");
      showBlock(block, parseFloat(value(form, spec[0])) > parseFloat(spec[1]));
    });
  }

  function showBlock(block, show) {
    block.hidden = !show;
    block.querySelectorAll("input, select").forEach(function (el) { el.disabled = !show; });
  }

  function applyFill(select) {
    var option = select.options[select.selectedIndex];
    if (!option || !option.dataset.fill) return;
    var values = JSON.parse(option.dataset.fill);
    Object.keys(values).forEach(function (name) {
      var input = select.form.elements[name];
      if (!input) return;
      input.value = "";
      input.placeholder = String(values[name]);
    });
  }

  function holds(form, spec) {
    if (!spec) return true;
    return spec.split(" ").every(function (clause) {
      var parts = clause.split("=");
      return parts[1].split("|").indexOf(value(form, parts[0])) >= 0;
    });
  }

  // Sliders that must stay multiples of another field (tp must divide ffn, count must divide
  // into world chunks for ReduceScatter …): data-multiple-of and data-when above.
  // Two passes, so chains settle (heads follows tp, then hidden follows heads).
  function fixMultiples(form) {
    for (var pass = 0; pass < 2; pass++) {
      form.querySelectorAll("[data-multiple-of]").forEach(function (slider) {
        if (!slider.dataset.baseMin) slider.dataset.baseMin = slider.dataset.min || slider.min;
        var base = parseInt(value(form, slider.dataset.multipleOf), 10);
        var step = holds(form, slider.dataset.when) && base > 0 ? base : 1;
        var low = Math.ceil(parseInt(slider.dataset.baseMin, 10) / step) * step;
        var high = Math.floor(parseInt(slider.max, 10) / step) * step;
        slider.min = String(low);
        slider.step = String(step);
        var current = parseInt(slider.value, 10);
        var rounded = Math.max(low, Math.min(high, Math.round(current / step) * step));
        if (rounded !== current) slider.value = String(rounded);
        setOutput(slider);
      });
    }
  }

  function markProblems() {
    document.querySelectorAll(".field.invalid").forEach(function (f) { f.classList.remove("invalid"); });
    document.querySelectorAll("[data-problem-param]").forEach(function (li) {
      var field = document.querySelector('[data-field="' + li.dataset.problemParam + '"]');
      if (field) field.classList.add("invalid");
    });
  }

  // -- the next states of a drag, fetched ahead ---------------------------------------------
  // A stage fragment is a pure function of its URL, so the states a drag is about to reach can
  // be fetched before it gets there (stage.js keeps them and swaps one in when it does) instead of
  // waiting, at that move, for a state the server has not rendered yet (15–40 ms here). The
  // guess is the slider's last move repeated (a drag at an even pace, or the arrow keys, moves
  // by the same amount each time); one that misses (a change of pace, a jump) costs a request
  // and nothing else.

  function stateUrl(form) {
    var drop = form.hasAttribute("data-drop-empty");
    var parts = [];
    new FormData(form).forEach(function (x, key) {  // encoded as htmx encodes a GET's parameters
      if (!(drop && x === "")) parts.push(encodeURIComponent(key) + "=" + encodeURIComponent(x));
    });
    return form.getAttribute("hx-get") + "?" + parts.join("&");
  }

  // A detached copy of the form holding the live form's current values. Cloning a form costs
  // more than a millisecond (every range and select builds its own inner tree), so one copy is
  // kept and brought up to date, which costs a few property writes.
  function copyOf(form) {
    var from = form.querySelectorAll("input, select");
    var copy = form.__copy;
    var to = copy && copy.querySelectorAll("input, select");
    if (!copy || to.length !== from.length) {
      form.__copy = form.cloneNode(true);  // values included
      return form.__copy;
    }
    for (var i = 0; i < from.length; i++) {  // written only where they differ
      var a = from[i], b = to[i];
      if (a.type === "range" && (b.min !== a.min || b.max !== a.max || b.step !== a.step)) {
        b.min = a.min; b.max = a.max; b.step = a.step;
      }
      if (a.type === "radio" || a.type === "checkbox") {
        if (b.checked !== a.checked) b.checked = a.checked;
      } else if (b.value !== a.value) b.value = a.value;
      if (b.disabled !== a.disabled) b.disabled = a.disabled;
    }
    return copy;
  }

  // The URLs of the states `count` moves of `steps` slider steps each (up if positive) lead to
  // from where the slider is, nearest first, up to the slider's end. The moves are made on a
  // copy of the form, one after another as a drag makes them, so that the hidden input the
  // slider drives and the sliders that depend on it change as they would on the way.
  function aheadUrls(slider, steps, count) {
    var form = slider.form;
    var index = Array.prototype.indexOf.call(form.querySelectorAll('input[type="range"]'), slider);
    var copy = copyOf(form);
    var probe = copy.querySelectorAll('input[type="range"]')[index];
    var urls = [];
    for (var k = 0; k < count; k++) {
      var before = probe.value;
      if (steps > 0) probe.stepUp(steps); else probe.stepDown(-steps);  // the browser's own steps
      if (probe.value === before) break;
      follow(copy, probe);
      fixMultiples(copy);
      urls.push(stateUrl(copy));
    }
    return urls;
  }

  function fetchAhead(urls, back) {
    if (window.ShardscopeStage) window.ShardscopeStage.fetchAhead(urls, back);
  }

  // -- the states one change away, fetched while the page rests --------------------------------
  // A jump (a click along a slider's track, a chip, the first move of a drag) lands on a state
  // no guess reached; rendering it on the spot costs the server 15–200 ms. The states one
  // change away from where the form rests are a small set, so they are fetched, one at a time,
  // while a person reads (stage.js stops asking the moment they move), as many as its allowance
  // at rest lets (about 30 states, 300 KB): first the key slider's nearest positions, then
  // every other choice of each chip row and list and one step of every other slider, in turn,
  // then the rest of the key slider's track, nearest first, up to KEY_POSITIONS positions each
  // way. A jump farther along a track is fetched when the pointer rests over it (watchIntent).
  // KEY_NEAR: the key slider's positions fetched first, four each way. A drag from rest moves
  // a position every 40–60 ms, and its guesses (two ahead, fetched as each move is painted)
  // get ahead of it only where the server renders a state in less than that: on /train's
  // 50 ms states, a drag beyond two positions outran its guesses for six moves.
  var KEY_POSITIONS = 80, KEY_NEAR = 8;

  function keySlider(form) {
    var key = document.body.dataset.keySlider;
    return key ? form.querySelector('input[type="range"][name="' + key + '"], ' +
      'input[type="range"][data-target="' + key + '"], input[type="range"][data-log2-for="' +
      key + '"]') : null;
  }

  // The state the form would ask for with `change` made to the copy (then undone by copyOf).
  function changedUrl(form, change) {
    var copy = copyOf(form);
    var el = change(copy);
    if (!el) return null;
    follow(copy, el);
    fixMultiples(copy);
    return stateUrl(copy);
  }

  function restUrls(form) {
    var urls = [], seen = {};
    seen[stateUrl(copyOf(form))] = true;
    function add(list) {
      list.forEach(function (url) { if (url && !seen[url]) { seen[url] = true; urls.push(url); } });
    }
    function interleave(up, down) {
      var out = [];
      for (var i = 0; i < Math.max(up.length, down.length); i++) {
        if (i < up.length) out.push(up[i]);
        if (i < down.length) out.push(down[i]);
      }
      return out;
    }
    var key = keySlider(form);
    var track = key ? interleave(aheadUrls(key, 1, KEY_POSITIONS), aheadUrls(key, -1, KEY_POSITIONS)) : [];
    add(track.slice(0, KEY_NEAR));
    var choices = [], steps = [];
    var inputs = form.querySelectorAll("input, select");
    Array.prototype.forEach.call(inputs, function (el, index) {
      if (el.disabled) return;
      if (el.type === "radio" && !el.checked) {
        choices.push(changedUrl(form, function (copy) {
          var radio = copy.querySelectorAll("input, select")[index];
          radio.checked = true;
          return radio;
        }));
      } else if (el.tagName === "SELECT") {
        Array.prototype.forEach.call(el.options, function (option, k) {
          if (k === el.selectedIndex || option.disabled) return;
          choices.push(changedUrl(form, function (copy) {
            var select = copy.querySelectorAll("input, select")[index];
            select.selectedIndex = k;
            return select;
          }));
        });
      }
    });
    var ranges = form.querySelectorAll('input[type="range"]');
    ranges.forEach(function (slider) {
      if (slider !== key && !slider.disabled) steps.push.apply(steps, aheadUrls(slider, 1, 1).concat(aheadUrls(slider, -1, 1)));
    });
    // chips and other sliders' steps taken in turn: fetching stops at its allowance (stage.js),
    // and a person is as likely to reach for either
    add(interleave(choices, steps));
    add(track.slice(KEY_NEAR));
    copyOf(form);  // the copy back to the live form's state
    return urls;
  }

  function fetchAtRest(form) {
    if (!window.ShardscopeStage || saveData()) return;
    window.ShardscopeStage.fetchAtRest(restUrls(form));
  }

  function saveData() {
    return !!(navigator.connection && navigator.connection.saveData);
  }

  // -- the state under the pointer, fetched before the click -------------------------------
  // A person looks before they click: the pointer comes to rest over the place on a slider's
  // track (or over a chip) a few hundred milliseconds before the click lands, and a jump fetched
  // then is, at the click, only a swap. The value a click gives is the one under the pointer:
  // the browser puts the thumb's centre there, the track less one thumb's width spanning
  // min … max. Once the pointer has rested DWELL_MS on a value, that state and its two
  // neighbours (a pixel either way) are fetched, nearest first (stage.js's intent queue, ahead of
  // the states at rest). A pointer sweeping past fetches nothing.
  var DWELL_MS = 60, THUMB_PX = 16;

  function valueUnder(slider, clientX) {
    var box = slider.getBoundingClientRect();
    var min = parseFloat(slider.min), max = parseFloat(slider.max);
    var step = parseFloat(slider.step) || 1;
    if (!(box.width > THUMB_PX) || !(max > min)) return null;
    var fraction = (clientX - box.left - THUMB_PX / 2) / (box.width - THUMB_PX);
    fraction = Math.max(0, Math.min(1, fraction));
    var steps = Math.round(fraction * (max - min) / step);
    return Math.min(max, min + steps * step);
  }

  // The state the form asks for with `slider` at `value` (null: the state on screen).
  function urlAt(slider, value) {
    var form = slider.form;
    var index = Array.prototype.indexOf.call(form.querySelectorAll('input[type="range"]'), slider);
    var copy = copyOf(form);
    var probe = copy.querySelectorAll('input[type="range"]')[index];
    probe.value = String(value);
    if (parseFloat(probe.value) === parseFloat(slider.value)) return null;
    follow(copy, probe);
    fixMultiples(copy);
    return stateUrl(copy);
  }

  function fetchIntent(urls, renew) {
    if (window.ShardscopeStage) window.ShardscopeStage.fetchIntent(urls.filter(Boolean), renew);
  }

  // the radio a pointer over a chip (its label) would choose
  function chipUnder(target) {
    var label = target.closest && target.closest("label");
    var radio = label ? (label.control || label.querySelector('input[type="radio"]'))
                      : (target.type === "radio" ? target : null);
    return radio && radio.type === "radio" && !radio.checked && !radio.disabled ? radio : null;
  }

  function watchIntent(form) {
    if (saveData()) return;
    var timer = null, last = null;
    function later(key, urls) {
      if (key === last) return;
      last = key;
      clearTimeout(timer);
      timer = setTimeout(function () { fetchIntent(urls()); }, DWELL_MS);
    }
    form.addEventListener("pointermove", function (event) {
      var el = event.target;
      if (event.buttons) return;  // a drag: it fetches its own guesses
      if (el.type === "range") {
        var v = valueUnder(el, event.clientX);
        if (v === null) return;
        var step = parseFloat(el.step) || 1;
        later(el.name + "|" + el.dataset.target + "|" + el.dataset.log2For + "=" + v, function () {
          return [v, v + step, v - step].filter(function (x) {
            return x >= parseFloat(el.min) && x <= parseFloat(el.max);
          }).map(function (x) { return urlAt(el, x); });
        });
        return;
      }
      var radio = chipUnder(el);
      if (radio) {
        var inputs = Array.prototype.slice.call(form.querySelectorAll("input, select"));
        var index = inputs.indexOf(radio);
        later("radio " + index, function () {
          return [changedUrl(form, function (copy) {
            var chosen = copy.querySelectorAll("input, select")[index];
            chosen.checked = true;
            return chosen;
          })];
        });
      }
    });
    form.addEventListener("pointerleave", function () { clearTimeout(timer); last = null; });
  }

  var PLAN_AFTER_MS = 300;  // the states one change away are worked out once a move has rested

  function watchSliders(form) {
    if (saveData()) return;
    var pace = 1, last = {}, moved = null;
    form.addEventListener("input", function (event) {
      var el = event.target;
      moved = el.type === "range" ? el : null;
      if (!moved) return;
      var v = parseFloat(el.value), step = parseFloat(el.step) || 1;
      var key = el.name || el.dataset.log2For || el.dataset.target;
      var before = key in last ? last[key] : parseFloat(el.defaultValue);
      var steps = Math.round((v - before) / step);
      if (steps !== 0) pace = steps;
      last[key] = v;
    });
    // Once the answer is on screen (stage.js keeps it), guess the next two states and fetch
    // them: after the paint, so that neither the guessing nor the server's rendering holds up
    // the browser painting this one (on a small machine they share the cores); two moves ahead,
    // so that the server has a whole move's time for each (the nearer one was the farther one
    // of the move before). The way back is where the drag came from, kept already.
    var planning = null;
    function planAtRest() {
      clearTimeout(planning);
      if (window.ShardscopeStage) window.ShardscopeStage.willPlan();
      planning = setTimeout(function () { fetchAtRest(form); }, PLAN_AFTER_MS);
    }
    form.addEventListener("stage:answered", function () {
      requestAnimationFrame(function () {
        setTimeout(function () {
          if (moved) fetchAhead(aheadUrls(moved, pace, 2), aheadUrls(moved, -pace, 1));
        }, 0);
      });
      planAtRest();
    });
    // (capture: before htmx's own listener, which may answer the move from memory at once)
    form.addEventListener("input", function () { clearTimeout(planning); }, true);
    planAtRest();
    // a slider taken hold of, before it moves: its neighbours, and the allowance at rest
    // renewed (intent); a list focused: each of its other choices
    ["pointerdown", "focusin"].forEach(function (type) {
      form.addEventListener(type, function (event) {
        var el = event.target;
        if (el.type === "range") {
          if (window.ShardscopeStage) window.ShardscopeStage.renewRest();
          fetchAhead(aheadUrls(el, 1, 1).concat(aheadUrls(el, -1, 1)));
        } else if (el.tagName === "SELECT" && type === "focusin") {
          var index = Array.prototype.indexOf.call(form.querySelectorAll("input, select"), el);
          fetchIntent(Array.prototype.map.call(el.options, function (option, k) {
            if (k === el.selectedIndex || option.disabled) return null;
            return changedUrl(form, function (copy) {
              var select = copy.querySelectorAll("input, select")[index];
              select.selectedIndex = k;
              return select;
            });
          }), true);
        }
      });
    });
  }

  // What one changed control brings along: its readout, the hidden input it drives, dependent
  // controls (fixMultiples, for the sliders that depend on others, runs beside it).
  function follow(form, el) {
    if (el.dataset && el.dataset.log2For) syncLog2(el);
    if (el.name) setOutput(el);
    if (el.tagName === "SELECT") applyFill(el);
    if (el.dataset && el.dataset.values) pickFromList(el);
    fixDependents(form);
  }

  function initForm(form) {
    if (form.__controls) return;
    form.__controls = true;
    // capture phase: runs before htmx's own listener reads the form
    form.addEventListener("input", function (event) { follow(form, event.target); }, true);
    if (form.hasAttribute("data-drop-empty")) {
      form.addEventListener("htmx:configRequest", function (event) {
        var params = event.detail.parameters;
        Array.prototype.forEach.call(form.elements, function (el) {
          if (el.name && el.value === "" && params[el.name] === "") delete params[el.name];
        });
      });
    }
    fixDependents(form);
    // only a field that a slider depends on can change another slider's steps
    var watched = {};
    form.querySelectorAll("[data-multiple-of]").forEach(function (slider) {
      watched[slider.dataset.multipleOf] = true;
      watched[slider.name] = true;
      (slider.dataset.when || "").split(" ").forEach(function (c) { watched[c.split("=")[0]] = true; });
    });
    form.addEventListener("input", function (event) {
      if (watched[event.target.name]) fixMultiples(form);
    }, true);
    fixMultiples(form);
    watchSliders(form);
    watchIntent(form);
  }

  function init(scope) {
    scope.querySelectorAll("form.controls").forEach(initForm);
    markProblems();
  }

  // stage.js asks for the URL of the state a form is at (the one htmx would request)
  window.ShardscopeForm = {stateUrl: stateUrl};

  document.addEventListener("DOMContentLoaded", function () { init(document); });
  document.addEventListener("htmx:load", function (event) { init(event.detail.elt.ownerDocument || document); });
})();
