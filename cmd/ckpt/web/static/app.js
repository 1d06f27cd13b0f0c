// ckpt web's only script, loaded from this file (the page's CSP allows no
// inline script). It reads ids from data attributes and writes nothing but
// class names: no agent text goes through it.
"use strict";

document.addEventListener("DOMContentLoaded", function () {
  // The thread's size reads every checkpoint's row: it comes after the page.
  var size = document.getElementById("size");
  if (size) {
    fetch(size.getAttribute("data-href"), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (st) {
        size.textContent = st.size;
        document.getElementById("deltas").textContent = String(st.deltas);
      })
      .catch(function () { size.textContent = "unknown"; });
  }

  var tree = document.getElementById("tree");
  if (!tree) {
    return;
  }
  // Hovering a checkpoint highlights the lines to its parents and children.
  var lit = [];
  function clear() {
    lit.forEach(function (p) { p.classList.remove("hl"); });
    lit = [];
  }
  tree.addEventListener("mouseover", function (ev) {
    var node = ev.target.closest ? ev.target.closest("g.node") : null;
    clear();
    if (!node) {
      return;
    }
    var id = node.getAttribute("data-id");
    tree.querySelectorAll("path.edge").forEach(function (p) {
      if (p.getAttribute("data-from") === id || p.getAttribute("data-to") === id) {
        p.classList.add("hl");
        lit.push(p);
      }
    });
  });
  tree.addEventListener("mouseleave", clear);
  // Open the page at the checkpoint asked for (?at=ID).
  var current = tree.querySelector("g.node.current");
  if (current && current.scrollIntoView) {
    current.scrollIntoView({ block: "center" });
  }
});
