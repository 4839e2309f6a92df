// Scene controls: live readouts, keeping dependent controls valid before htmx sends the form,
// highlighting the parameters the server rejected, and the embed dialog.
//
// Dependent controls are declared in the markup, so every scene gets them for free:
//   data-multiple-of-world="op op …"  this slider moves in steps of the rank count for those ops
//   data-max-world                    this slider's maximum is the rank count − 1 (a root rank)
//   data-ops="op op …"                this radio only makes sense for those ops
//   data-show-for="op op …"           this block only shows for those ops
//   data-show-when="name=v1 v2 …"     this block only shows while control `name` has one of
//                                     those values; its inputs are disabled (not sent) otherwise
//   data-values="1 2 4 …" data-target="name"   a range input that picks from a list: its
//                                     position indexes the list, the value goes to the hidden
//                                     input `name` (a slider over 1 … 1024 that stays precise)
(function () {
  "use strict";

  function value(form, name) {
    var el = form.elements[name];
    if (!el) return null;
    return el.value !== undefined ? el.value : null;
  }

  function setOutput(input) {
    var out = document.querySelector('output[data-for="' + input.name + '"]');
    if (out) out.textContent = input.value;
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

  function showWhen(form) {
    form.querySelectorAll("[data-show-when]").forEach(function (block) {
      var rule = block.dataset.showWhen.split("=");
      var current = value(form, rule[0]);
      var show = rule[1].split(" ").indexOf(current) >= 0;
      block.hidden = !show;
      block.querySelectorAll("input, select").forEach(function (el) { el.disabled = !show; });
    });
  }

  function fixDependents(form) {
    var op = value(form, "op");
    var world = parseInt(value(form, "world"), 10);
    form.querySelectorAll("[data-multiple-of-world]").forEach(function (slider) {
      var splits = slider.dataset.multipleOfWorld.split(" ").indexOf(op) >= 0;
      var step = splits && world ? world : 1;
      var max = parseInt(slider.max, 10);
      var current = parseInt(slider.value, 10);
      slider.min = String(step);
      slider.step = String(step);
      var rounded = Math.max(step, Math.min(Math.floor(max / step) * step, Math.round(current / step) * step));
      if (rounded !== current) slider.value = String(rounded);
      setOutput(slider);
    });
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
      block.hidden = block.dataset.showFor.split(" ").indexOf(op) < 0;
    });
  }

  function markProblems() {
    document.querySelectorAll(".field.invalid").forEach(function (f) { f.classList.remove("invalid"); });
    document.querySelectorAll("[data-problem-param]").forEach(function (li) {
      var field = document.querySelector('[data-field="' + li.dataset.problemParam + '"]');
      if (field) field.classList.add("invalid");
    });
  }

  function embedSnippet(root) {
    var url = new URL(window.location.href);
    url.pathname = "/embed" + url.pathname;
    var area = root.querySelector("[data-embed-code]");
    var title = area.dataset.title || "Shardscope";
    return '<iframe src="' + url.href + '" width="960" height="680" style="border:0;max-width:100%" ' +
      'title="' + title.replace(/"/g, "&quot;") + ' (Shardscope)" loading="lazy" allowfullscreen></iframe>';
  }

  function initEmbed(scope) {
    scope.querySelectorAll("[data-embed-open]").forEach(function (button) {
      if (button.__embed) return;
      button.__embed = true;
      var share = button.closest(".share");
      var dialog = share.querySelector("[data-embed-dialog]");
      var area = share.querySelector("[data-embed-code]");
      button.addEventListener("click", function () {
        area.value = embedSnippet(share);
        share.querySelector("[data-embed-copied]").hidden = true;
        dialog.showModal();
        area.select();
      });
      share.querySelector("[data-embed-copy]").addEventListener("click", function () {
        area.select();
        var done = function () { share.querySelector("[data-embed-copied]").hidden = false; };
        if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(area.value).then(done, done);
        else { document.execCommand("copy"); done(); }
      });
    });
  }

  function initForm(form) {
    if (form.__controls) return;
    form.__controls = true;
    // capture phase: runs before htmx's own listener reads the form
    form.addEventListener("input", function (event) {
      if (event.target.name) setOutput(event.target);
      if (event.target.dataset && event.target.dataset.values) pickFromList(event.target);
      fixDependents(form);
      showWhen(form);
    }, true);
    fixDependents(form);
    showWhen(form);
  }

  function init(scope) {
    scope.querySelectorAll("form.controls").forEach(initForm);
    initEmbed(scope);
    markProblems();
  }

  document.addEventListener("DOMContentLoaded", function () { init(document); });
  document.addEventListener("htmx:load", function (event) { init(event.detail.elt.ownerDocument || document); });
})();
