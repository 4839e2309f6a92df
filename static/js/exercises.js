// Exercises: progress kept in this browser (localStorage, no accounts), random seeds, and the
// verdicts htmx swaps in. The answer is never here: checking happens on the server.
(function () {
  "use strict";
  var KEY = "shardscope-exercises";

  function load() {
    try { return JSON.parse(window.localStorage.getItem(KEY) || "{}") || {}; }
    catch (e) { return {}; }
  }
  function save(state) {
    try { window.localStorage.setItem(KEY, JSON.stringify(state)); } catch (e) { /* private mode */ }
  }

  // a verdict on the page: a right answer marks its problem solved (for this seed)
  function record(scope) {
    var state = load(), changed = false;
    (scope || document).querySelectorAll("[data-result][data-correct]").forEach(function (el) {
      var id = el.dataset.id, seed = el.dataset.seed;
      var entry = state[id] || { solved: [], revealed: [] };
      var list = el.dataset.correct === "true" ? entry.solved : (el.dataset.revealed ? entry.revealed : null);
      if (list && list.indexOf(seed) < 0) { list.push(seed); changed = true; }
      state[id] = entry;
    });
    if (changed) save(state);
    show(state);
  }

  // ✓ on every solved problem's link or badge; "k of n solved" on each chapter's badge
  function show(state) {
    state = state || load();
    document.querySelectorAll("[data-progress-id]").forEach(function (el) {
      var entry = state[el.dataset.progressId];
      el.classList.toggle("solved", !!(entry && entry.solved && entry.solved.length));
    });
    document.querySelectorAll("[data-progress-chapter]").forEach(function (el) {
      var ids = el.dataset.progressChapter.split(" ");
      var done = ids.filter(function (id) { return state[id] && state[id].solved && state[id].solved.length; }).length;
      el.textContent = done + " of " + ids.length + " solved";
      el.classList.toggle("solved", done === ids.length);
    });
  }

  document.addEventListener("click", function (event) {
    var random = event.target.closest && event.target.closest("[data-random-seed]");
    if (random) {
      var seed = Math.floor(Math.random() * 1000000) + 2;
      window.location.href = random.dataset.randomSeed + "?seed=" + seed;
    }
    if (event.target.closest && event.target.closest("[data-reset-progress]")) {
      save({});
      show({});
    }
  });
  document.addEventListener("DOMContentLoaded", function () { record(document); });
  document.addEventListener("htmx:afterSwap", function (event) { record(event.detail.target); });
})();
