// What a slider move costs the browser. The stage is swapped whole for every move, so: states
// already seen (or fetched ahead) are swapped in from memory without a request, from trees
// parsed while the page waited; the old stage is emptied before it is replaced; and panels out
// of sight wait until the slider comes to rest.
(function () {
  "use strict";

  // -- an expected abort is not an error ---------------------------------------------------------
  // hx-sync="this:replace" aborts the request of a move when the next move comes (a drag makes
  // dozens), and htmx logs each abort with console.error ("htmx:afterRequest", "htmx:sendAbort")
  // before any listener runs. Those two lines, written while an XMLHttpRequest is being aborted
  // (its abort event fires inside abort()), are dropped; every other error still shows.
  var aborting = 0;
  var abort = XMLHttpRequest.prototype.abort;
  XMLHttpRequest.prototype.abort = function () {
    aborting++;
    try { return abort.apply(this, arguments); } finally { aborting--; }
  };
  var consoleError = console.error;
  console.error = function (message) {
    if (aborting && typeof message === "string" &&
        /^htmx:(afterRequest|sendAbort)\b/.test(message)) return;
    return consoleError.apply(console, arguments);
  };

  // -- states kept in memory -------------------------------------------------------------------
  // Every stage fragment this page received, by the URL htmx asks for, with its status (a state
  // the server rejects is a stage too: its problems). A fragment is a pure function of its URL,
  // so a move onto a state the page has shown, or onto one fetched ahead (controls.js guesses
  // where a drag goes next, and fetches the states one change away while the page rests), is
  // swapped in from here (swapStage below): even an answer from the browser's HTTP cache
  // takes 5–10 ms. Bounded by characters, oldest out first.
  var KEEP_CHARS = 36e6, KEEP_STATES = 400, REST_CHARS = 0.75 * KEEP_CHARS;
  var kept = new Map(), keptChars = 0, shown = null;  // shown: the URL of the state on screen

  function keep(url, html, status) {
    var old = kept.get(url);
    if (old) { keptChars -= old.html.length; kept.delete(url); }  // most recent last
    kept.set(url, {html: html, status: status || 200});
    keptChars += html.length;
    if (wantTrees.indexOf(url) >= 0) makeTrees();
    while (kept.size > 1 && (keptChars > KEEP_CHARS || kept.size > KEEP_STATES)) {
      var oldest = kept.keys().next().value;
      keptChars -= kept.get(oldest).html.length;
      kept.delete(oldest);
    }
  }

  // -- states made ready to show ---------------------------------------------------------------
  // Parsing a stage's markup (50–300 KB) costs 4–6 ms here, htmx's own parse more; a tree parsed
  // ahead of time (into a template, adopted by this document, its scripts removed as htmx
  // removes them) is inserted in about 2 ms. The states a move is likely to reach
  // next are made ready while the page waits between moves: where a drag goes and where it came
  // from, and the nearest states one change away. A tree is shown once (the player then changes
  // it), so it is made again if wanted again; at most READY_TREES are held.
  var READY_TREES = 6;
  var trees = new Map(), wantTrees = [], making = null;

  function makeTree(html) {
    var template = document.createElement("template");
    template.innerHTML = html;
    var tree = document.adoptNode(template.content);
    tree.querySelectorAll("script").forEach(function (script) { script.remove(); });
    return tree;
  }

  function takeTree(url) {
    var tree = trees.get(url) || null;
    trees.delete(url);
    return tree;
  }

  function expectTrees(urls) {
    wantTrees = urls.slice(0, READY_TREES);
    var wanted = new Set(wantTrees);
    trees.forEach(function (tree, url) { if (!wanted.has(url)) trees.delete(url); });
    makeTrees();
  }

  // A tree is made in an idle period, but never between a swap and the frame that paints it:
  // Chrome does not end an idle period when an input comes, so a parse begun just after a move's
  // swap (4–12 ms for a stage here) held that move's frame back by as much (a drag's p95 fell
  // from 36 to 30 ms over four heavy scenes without it). Waiting for an idle period with room
  // for the whole parse instead (its deadline) left a fast drag without trees: worse.
  var painting = false;

  function makeTrees() {
    if (making) return;
    var idle = window.requestIdleCallback || function (f) { return setTimeout(f, 1); };
    making = idle(function () {
      making = null;
      var url = wantTrees.find(function (u) { return kept.has(u) && !trees.has(u); });
      if (!url) return;
      if (painting) { afterPaint(makeTrees); return; }
      trees.set(url, makeTree(kept.get(url).html));
      makeTrees();  // one tree an idle period
    }, {timeout: 200});
  }

  // A kept state's tree swapped in as htmx's outerHTML swap would (the element focused inside
  // the stage focused again, htmx's afterSwap, load and afterSettle events), except that htmx
  // processes only the elements that carry its attributes (a stage's verify forms and job boxes)
  // instead of walking the whole stage, its thousands of deck elements included: 3 ms a move.
  var HTMX_ELEMENTS = "[hx-get], [hx-post], [data-hx-get], [data-hx-post]";

  function bindHtmx(root) {
    root.querySelectorAll(HTMX_ELEMENTS).forEach(function (el) { htmx.process(el); });
  }

  function swapStage(target, tree, focused) {
    var stage = tree.querySelector("#stage") || tree.firstElementChild;
    holdPanels(stage);
    if (keepParts(target, stage)) {
      stage = target;
    } else {
      empty(target);
      target.replaceWith(tree);
    }
    bindHtmx(stage);
    var again = focused && document.getElementById(focused);
    if (again && again !== document.activeElement) again.focus({preventScroll: true});
    htmx.trigger(stage, "htmx:afterSwap", {target: stage});
    htmx.trigger(stage, "htmx:load", {elt: stage});
    htmx.trigger(stage, "htmx:afterSettle", {target: stage});
  }

  // The toolbar and the player bar differ from one state to the next only in a few links and
  // numbers. Those on screen stay there, brought up to the new state's (attributes and text
  // copied over; a part whose shape changed is swapped for the new one): a node that left the
  // document is styled and laid out anew when it comes back, 1.5–2 ms a move for these two.
  // The stage and its player stay too, their other children swapped. False where the stage has
  // no player to keep (the caller then swaps the stage whole).
  var KEPT_PARTS = [".toolbar", ".player-bar"];

  function keepParts(old, fresh) {
    var player = old.querySelector(":scope > [data-player]");
    var freshPlayer = fresh.querySelector(":scope > [data-player]");
    if (old.id !== fresh.id || !player || !freshPlayer) return false;
    var kept = new Map();  // fresh part → the part on screen, brought up to it
    KEPT_PARTS.forEach(function (selector) {
      var part = player.querySelector(":scope > " + selector);
      var freshPart = freshPlayer.querySelector(":scope > " + selector);
      if (part && freshPart) { bringUp(part, freshPart); kept.set(freshPart, part); }
    });
    if (!kept.size) return false;
    copyAttributes(old, fresh);
    copyAttributes(player, freshPlayer);
    adoptChildren(player, freshPlayer, kept);
    adoptChildren(old, fresh, new Map([[freshPlayer, player]]));
    return true;
  }

  function copyAttributes(el, from) {
    for (var i = el.attributes.length - 1; i >= 0; i--) {
      var gone = el.attributes[i];
      if (!from.hasAttributeNS(gone.namespaceURI, gone.localName)) el.removeAttributeNode(gone);
    }
    for (var j = 0; j < from.attributes.length; j++) {
      var a = from.attributes[j];
      if (el.getAttributeNS(a.namespaceURI, a.localName) !== a.value) el.setAttributeNS(a.namespaceURI, a.name, a.value);
    }
  }

  // `el` (on screen) made to hold what `from` holds, touching only what differs (a subtree
  // equal already, as the browser compares nodes, is passed over: a third less time here)
  function bringUp(el, from) {
    if (el.nodeType !== 1) {
      if (el.data !== from.data) el.data = from.data;
      return;
    }
    copyAttributes(el, from);
    var mine = Array.from(el.childNodes), theirs = Array.from(from.childNodes);
    if (mine.length !== theirs.length) {
      el.replaceChildren.apply(el, theirs);
      return;
    }
    for (var i = 0; i < mine.length; i++) {
      if (mine[i].nodeName !== theirs[i].nodeName) el.replaceChild(theirs[i], mine[i]);
      else if (!mine[i].isEqualNode(theirs[i])) bringUp(mine[i], theirs[i]);
    }
  }

  // `el`'s children become `from`'s, except that each kept child (a value of `kept`, on screen)
  // stays where its counterpart (its key) stands in `from`; kept children never leave the page
  function adoptChildren(el, from, kept) {
    var staying = new Set(kept.values());
    Array.from(el.childNodes).forEach(function (child) { if (!staying.has(child)) el.removeChild(child); });
    var before = el.firstChild;
    Array.from(from.childNodes).forEach(function (child) {
      var mine = kept.get(child);
      if (mine) before = mine.nextSibling;
      else el.insertBefore(child, before);
    });
  }

  // `then` once the frame that follows has been painted
  function afterPaint(then) {
    requestAnimationFrame(function () { setTimeout(then, 0); });
  }

  // Three queues, fetched one request at a time so that a person's own move is answered first:
  // the guesses of a drag (`ahead`, replaced by each move), the states under the pointer
  // (`intent`: where a click on a slider's track or a chip would land, replaced as the pointer
  // moves) and, behind them, the states one change away (`restful`), fetched only while the page
  // rests (RESTING_MS without a move and no move of the person's own in flight). Each carries
  // X-Fetch-Ahead (its tier): the server then answers a rejected state with 200 (its
  // X-Stage-Status says 422, so the browser logs no failed load), and 204 when it is busy
  // rendering someone's move; a state at rest is asked again later, each time after twice as
  // long (up to RETRY_MAX_MS), so that a busy server is not asked over and over.
  var RESTING_MS = 400, RETRY_MS = 150, RETRY_MAX_MS = 5000;
  var ahead = [], intent = [], restful = [], fetching = null, lastMove = 0, asking = 0,
      askedAt = 0, retryMs = RETRY_MS;

  // What fetching at rest may cost (DESIGN.md's budget: a page at rest fetches at most ~300 KB
  // on the wire and ~30 states; more only on intent). The allowance is spent by the states
  // fetched at rest and renewed by a sign of intent: a move of the person's own, a control
  // taken hold of (renewRest). A class of a hundred on one Wi-Fi then pulls 30 MB, not 400.
  // Under Save-Data (navigator.connection.saveData) nothing is fetched ahead at all.
  var REST_STATES = 30, REST_BYTES = 300e3;
  var SAVE_DATA = !!(navigator.connection && navigator.connection.saveData);
  var spent = {states: 0, bytes: 0};

  function renewRest() { spent = {states: 0, bytes: 0}; }

  // whether another state at rest stays within the allowance (a state costs about the mean)
  function restAllowed() {
    if (spent.states >= REST_STATES) return false;
    var mean = spent.states ? spent.bytes / spent.states : 0;
    return spent.bytes + mean <= REST_BYTES;
  }

  // the bytes an answer took on the wire: its (compressed) Content-Length, else the browser's
  // Resource Timing entry, else its text
  function wireBytes(response, url, html) {
    var length = parseInt(response.headers.get("Content-Length") || "", 10);
    if (length > 0) return length;
    var entries = performance.getEntriesByName ? performance.getEntriesByName(new URL(url, location.href).href) : [];
    var last = entries.length && entries[entries.length - 1];
    return last && last.transferSize ? last.transferSize : html.length;
  }

  function wanted(url) {
    return url && !kept.has(url) && !(fetching && fetching.url === url);
  }

  // `urls`: the states a drag is about to reach, nearest first; `back`: the state a move the
  // other way reaches, made ready too. It is kept already, but where a slider re-steps the
  // sliders that depend on it (tp must divide ffn: ffn 32 at tp 8 becomes 28 at tp 7, not the
  // 30 the way up passed), the way back is a state not seen, fetched after the guesses.
  function fetchAhead(urls, back) {
    if (SAVE_DATA) return;
    var expected = urls.concat(back || []);
    ahead = expected.filter(wanted);
    expectTrees(expected);
    next();
  }

  // The states where the pointer says a click will land (controls.js), nearest first; `renew`:
  // a control was taken hold of (focus, a press), which renews the allowance at rest too.
  function fetchIntent(urls, renew) {
    if (SAVE_DATA) return;
    if (renew) renewRest();
    intent = urls.filter(wanted);
    expectTrees(urls.concat(wantTrees.filter(function (u) { return urls.indexOf(u) < 0; })));
    next();
  }

  // controls.js says when it will work out the states one change away (a move has just been
  // answered), and hands them over when it has
  var planned = false;
  function willPlan() { planned = !SAVE_DATA; }

  // What the page holds and the new plan does not need makes room first, oldest first (the
  // state on screen stays): fetching at rest stops at REST_CHARS and so never pushes out a
  // state it fetched for this plan.
  function fetchAtRest(urls) {
    planned = false;
    if (SAVE_DATA) return;
    var plan = new Set(urls);
    var room = REST_CHARS / 2;
    for (var entry of Array.from(kept.entries())) {
      if (keptChars <= room) break;
      if (plan.has(entry[0]) || entry[0] === shown) continue;
      keptChars -= entry[1].html.length;
      kept.delete(entry[0]);
    }
    restful = urls.filter(wanted);
    expectTrees(urls);
    next();
  }

  function atRest() {
    var now = performance.now();  // (an answer lost on the way stops counting after 10 s)
    return (!asking || now - askedAt > 10000) && now - lastMove >= RESTING_MS;
  }

  function take(queue) {
    while (queue.length) {
      var url = queue.shift();
      if (wanted(url)) return url;
    }
    return null;
  }

  var wake = null;
  function next() {
    if (fetching) return;
    var tier = "guess", url = take(ahead);
    if (!url && intent.length) { tier = "intent"; url = take(intent); }
    if (!url && restful.length) {
      if (!atRest()) {  // look again once the page rests
        clearTimeout(wake);
        wake = setTimeout(next, Math.max(RETRY_MS, RESTING_MS - (performance.now() - lastMove)));
        return;
      }
      // fetching at rest never pushes out what the page holds (it stops at REST_CHARS), nor
      // goes past its allowance
      if (keptChars > REST_CHARS || !restAllowed()) { restful = []; return; }
      tier = "rest";
      url = take(restful);
    }
    if (!url) return;
    var retry = false;
    var done = fetch(url, {headers: {"HX-Request": "true", "X-Fetch-Ahead": tier},
                           credentials: "same-origin", priority: "low"})
      .then(function (response) {
        if (response.status === 204) { retry = tier === "rest"; return null; }
        retryMs = RETRY_MS;
        if (response.status !== 200) return null;
        var status = parseInt(response.headers.get("X-Stage-Status") || "200", 10);
        return response.text().then(function (html) {
          if (tier === "rest") {
            spent.states++;
            spent.bytes += wireBytes(response, url, html);
          }
          keep(url, html, status);
        });
      })
      .catch(function () {})
      .then(function () {
        fetching = null;
        if (retry) {
          restful.unshift(url);
          clearTimeout(wake);
          wake = setTimeout(next, retryMs);
          retryMs = Math.min(RETRY_MAX_MS, retryMs * 2);
        } else next();
      });
    fetching = {url: url, done: done};
  }

  // Whether every state asked for at rest has been fetched (the bench waits on it, as a person
  // reading the page would, before it moves a slider).
  function settled() {
    return !planned && !fetching && !ahead.length && !intent.length && !restful.length;
  }

  function isStageGet(detail) {
    return detail.target && detail.target.id === "stage" && detail.requestConfig &&
      detail.requestConfig.verb === "get";
  }

  var moves = 0;  // counts the stage requests, so that a late answer knows it was overtaken

  // Tells the form that its move is answered (controls.js then fetches the next states).
  function answered(detail, url) {
    detail.elt.dispatchEvent(new CustomEvent("stage:answered", {bubbles: true, detail: {url: url}}));
  }

  function answer(detail, url, state) {
    keep(url, state.html, state.status);
    shown = url;
    var target = detail.target;
    var active = document.activeElement;  // (before the old stage is emptied)
    var focused = active && active !== target && target.contains(active) ? active.id : "";
    measure();
    swapStage(target, takeTree(url) || makeTree(state.html), focused);
    // as hx-push-url does, once the new stage is painted: a same-document navigation costs
    // Chromium 3–5 ms here (it fetches and decodes the favicon again), which would otherwise
    // delay the frame that shows the move
    // (the address leaves out the deck's box: box.js)
    var address = window.ShardscopeBox ? window.ShardscopeBox.address(url) : url;
    afterPaint(function () { window.history.pushState({htmx: true}, "", address); });
    answered(detail, url);
  }

  // A move onto a kept state is answered from memory; one onto the state being fetched ahead
  // waits for that fetch rather than asking again. Both are settled when htmx asks to confirm
  // the request, before it reads the form and builds a request (1.5 ms a move here): the URL
  // is the one htmx would ask for (controls.js's stateUrl), and the request of an earlier move
  // still in flight is aborted, as hx-sync="this:replace" would. What is neither goes on to
  // htmx's request (beforeRequest, where the same check runs once more with htmx's own URL).
  function inMemory(url) {
    return kept.has(url) || !!(fetching && fetching.url === url);
  }

  function countMove() {
    lastMove = performance.now();
    renewRest();  // a move of the person's own: intent
    return ++moves;
  }

  // answers a move onto a state inMemory() knows
  function fromMemory(detail, url) {
    var move = countMove();
    if (kept.has(url)) {
      answer(detail, url, kept.get(url));
      return;
    }
    fetching.done.then(function () {
      if (move !== moves || !detail.target.isConnected) return;  // moved on meanwhile
      if (kept.has(url)) answer(detail, url, kept.get(url));
      else htmx.trigger(detail.elt, "submit");  // the fetch failed: ask through htmx
    });
  }

  document.addEventListener("htmx:confirm", function (event) {
    var detail = event.detail;
    var form = detail.elt;
    if (!detail.target || detail.target.id !== "stage" || detail.verb !== "get" ||
        !form || form.tagName !== "FORM" || !window.ShardscopeForm) return;
    var url = window.ShardscopeForm.stateUrl(form);
    if (!inMemory(url)) return;
    event.preventDefault();
    htmx.trigger(form, "htmx:abort");
    fromMemory(detail, url);
  });

  document.addEventListener("htmx:beforeRequest", function (event) {
    var detail = event.detail;
    if (!isStageGet(detail)) return;
    var url = detail.pathInfo.finalRequestPath;
    if (inMemory(url)) {
      event.preventDefault();
      fromMemory(detail, url);
    } else {
      countMove();
      asking++;  // the person's own request: nothing is fetched at rest meanwhile
      askedAt = lastMove;
    }
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var detail = event.detail;
    if (!isStageGet(detail)) return;
    if (asking) asking--;
    lastMove = performance.now();
    next();
    if (!detail.xhr || (detail.xhr.status !== 200 && detail.xhr.status !== 422)) return;
    keep(detail.pathInfo.finalRequestPath, detail.xhr.responseText, detail.xhr.status);
    shown = detail.pathInfo.finalRequestPath;
    answered(detail, detail.pathInfo.finalRequestPath);
  });

  // -- the swap itself ---------------------------------------------------------------------------
  // Panels below (or above) the window are rendered for a new stage once the slider comes to
  // rest: when it is let go ("change"), when the page scrolls, or REST_MS after the last move.
  // While a slider is dragged, the browser then lays out, paints and rasterises only what a
  // person can see: panels out of sight cost as much again as the deck here, every move
  // (Chromium renders what lies within about a window's height of the fold, content-visibility
  // or not). Panels on screen are rendered with every move, as the deck is. Where the panels
  // are, and how tall, is told by observers, which the browser answers while it renders anyway:
  // asking at the swap would lay out the whole page once more, for nothing.
  var REST_MS = 250;
  var panelsShown = true, panelsHeight = 0, deferred = null, resting = null;
  var sight = "IntersectionObserver" in window && new IntersectionObserver(function (entries) {
    panelsShown = entries[entries.length - 1].isIntersecting;
  });
  var size = "ResizeObserver" in window && new ResizeObserver(function (entries) {
    panelsHeight = entries[entries.length - 1].borderBoxSize[0].blockSize;
  });

  function watchPanels() {
    if (!sight || !size) return;
    sight.disconnect();
    size.disconnect();
    var panels = document.querySelector("#stage .panels");
    if (panels) { sight.observe(panels); size.observe(panels); }
  }

  // Before a stage is replaced.
  function measure() {
    deferred = sight && size && !panelsShown && panelsHeight > 0 ? panelsHeight : null;
  }

  // htmx walks every element it removes, firing an event on each; a deck has thousands of
  // elements and none of them carries htmx attributes: the stage goes whole, so empty it first
  function empty(target) {
    target.replaceChildren();
  }

  function prepare(target) {
    measure();
    empty(target);
  }

  // A kept state's panels that will wait (prepare found them out of sight) go in without their
  // contents, which come when the panels are shown: in a stage swapped from memory, inserting
  // (and styling) hundreds of table cells nobody sees costs up to 4 ms a move here, even hidden.
  var held = null;  // {panels, contents}
  function holdPanels(stage) {
    held = null;
    var panels = deferred !== null && stage.querySelector(".panels");
    if (!panels || !panels.firstChild) return;
    var contents = document.createDocumentFragment();
    while (panels.firstChild) contents.appendChild(panels.firstChild);
    held = {panels: panels, contents: contents};
  }

  function fillPanels() {
    var hold = held;
    held = null;
    if (!hold || !hold.panels.isConnected) return;
    hold.panels.appendChild(hold.contents);
    bindHtmx(hold.panels);
    htmx.trigger(hold.panels, "htmx:load", {elt: hold.panels});
  }

  function showPanels() {
    clearTimeout(resting);
    resting = null;
    fillPanels();
    var panels = document.querySelector("#stage .panels");
    if (panels && panels.style.contentVisibility === "hidden") {
      panels.style.contentVisibility = "";
      panels.style.containIntrinsicSize = "";
    }
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (!event.detail.shouldSwap || !target) return;
    if (target.id === "stage") prepare(target);
    else target.querySelectorAll("svg.deck").forEach(function (deck) { deck.remove(); });
  });

  document.addEventListener("htmx:afterSwap", function () {
    painting = true;
    afterPaint(function () { painting = false; });
    var panels = document.querySelector("#stage .panels");
    var height = deferred;
    deferred = null;
    if (panels && height !== null) {
      // hidden at the height the old panels had, so that nothing below moves meanwhile
      panels.style.containIntrinsicSize = "auto " + Math.round(height) + "px";
      panels.style.contentVisibility = "hidden";
      clearTimeout(resting);
      resting = setTimeout(showPanels, REST_MS);
    }
    watchPanels();
  });

  document.addEventListener("change", showPanels);  // a slider let go (or any other control)
  window.addEventListener("scroll", showPanels, {passive: true});
  document.addEventListener("DOMContentLoaded", watchPanels);

  window.ShardscopeStage = {fetchAhead: fetchAhead, fetchAtRest: fetchAtRest, willPlan: willPlan,
                            fetchIntent: fetchIntent, renewRest: renewRest, settled: settled,
                            spentAtRest: function () { return {states: spent.states, bytes: spent.bytes}; },
                            readyUrls: function () { return Array.from(trees.keys()); },
                            keptUrls: function () { return Array.from(kept.keys()); },
                            keptCount: function () { return kept.size; }};
})();
