// "Load a config.json": a Hugging Face config (a file or pasted text) is sent to
// POST /api/model-shape, and the shape it answers fills this page's model fields
// (templates/_partials/model_config.html). The config never leaves the request: nothing is
// stored, and what comes back is written as text, never as markup.
(function () {
  "use strict";
  var LIMIT = 1 << 20;            // the endpoint's own bound (app/sim/planner/hf_config.py)

  function say(box, text, bad) {
    var status = box.querySelector("[data-config-status]");
    status.textContent = text;
    status.classList.toggle("problem", !!bad);
  }

  function valueOf(answer, key) {
    if (answer.shape && answer.shape[key] !== undefined) return answer.shape[key];
    return answer[key];
  }

  function setField(el, value) {
    if (!el || value === undefined || value === null) return false;
    if (el.tagName === "SELECT") {
      var found = Array.prototype.some.call(el.options, function (o) {
        return o.value === String(value);
      });
      if (!found) return false;
    }
    el.value = String(value);
    var fold = el.closest("details");
    if (fold) fold.open = true;
    return true;
  }

  function fill(box, answer) {
    var form = box.closest("form");
    var fields = JSON.parse(box.getAttribute("data-fields") || "{}");
    var presetName = box.getAttribute("data-preset") || "preset";
    var preset = form && form.elements[presetName];
    var moePreset = answer.family === "moe" && preset && preset.tagName === "SELECT" &&
      Array.prototype.some.call(preset.options, function (o) { return o.value === answer.preset; });
    var done = [];
    if (preset && preset.tagName === "SELECT" && setField(preset, answer.preset)) {
      // the preset first: choosing one empties the shape fields (controls.js), then they fill
      preset.dispatchEvent(new Event("change", { bubbles: true }));
      done.push(presetName + " " + answer.preset);
    }
    var last = preset;
    Object.keys(fields).forEach(function (key) {
      if (moePreset) return;
      var el = form.elements[fields[key]];
      if (setField(el, valueOf(answer, key))) {
        done.push(fields[key] + " " + valueOf(answer, key));
        last = el;
      }
    });
    if (last) last.dispatchEvent(new Event("input", { bubbles: true }));
    var read = (answer.read || []).length, ignored = (answer.ignored || []).length;
    var text = answer.model_type + ": read " + read + " key" + (read === 1 ? "" : "s") +
      ", ignored " + ignored + ". Filled " + (done.length ? done.join(", ") : "nothing") + ".";
    if (moePreset) {
      text += " MoE models are priced from their preset here: its own sizes stand.";
    }
    say(box, text, false);
  }

  function send(box, text) {
    if (text.length > LIMIT) {
      say(box, "A config.json is at most 1 MB; this one is " + text.length.toLocaleString() +
        " bytes.", true);
      return;
    }
    say(box, "Reading…", false);
    fetch("/api/model-shape", { method: "POST", body: text,
                                 headers: { "Content-Type": "application/json" } })
      .then(function (r) { return r.json().then(function (body) { return [r.status, body]; }); })
      .then(function (pair) {
        if (pair[0] === 200) fill(box, pair[1]);
        else say(box, pair[1].message || ("The server answered " + pair[0] + "."), true);
      })
      .catch(function () { say(box, "The server could not be reached.", true); });
  }

  function setUp(box) {
    // typing in the loader is not a parameter change: keep its events from the form (htmx)
    ["input", "change", "keydown"].forEach(function (type) {
      box.addEventListener(type, function (e) {
        if (e.target.closest("[data-config-own]")) e.stopPropagation();
      });
    });
    var file = box.querySelector("[data-config-file]");
    var paste = box.querySelector("[data-config-text]");
    file.addEventListener("change", function () {
      var f = file.files && file.files[0];
      if (!f) return;
      if (f.size > LIMIT) {
        say(box, "A config.json is at most 1 MB; " + f.name + " is " +
          f.size.toLocaleString() + " bytes.", true);
        return;
      }
      f.text().then(function (text) { send(box, text); });
    });
    box.querySelector("[data-config-load]").addEventListener("click", function () {
      if (paste.value.trim()) send(box, paste.value);
      else say(box, "Paste a config.json first, or choose a file.", true);
    });
  }

  function init(root) {
    (root || document).querySelectorAll("[data-model-config]").forEach(function (box) {
      if (!box.hasAttribute("data-ready")) {
        box.setAttribute("data-ready", "");
        setUp(box);
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () { init(document); });
  document.addEventListener("htmx:afterSettle", function (e) { init(e.target); });
})();
