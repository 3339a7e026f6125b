// Names each table cell by its column (data-label), for the phone layout of layout.css,
// on load and whenever the part of the page that refreshes itself is replaced.
"use strict";
(function () {
  function label(root) {
    root.querySelectorAll("table").forEach(function (table) {
      var heads = table.querySelectorAll("thead th");
      if (!heads.length) { return; }
      table.querySelectorAll("tbody tr").forEach(function (row) {
        var column = 0;
        Array.prototype.forEach.call(row.cells, function (cell) {
          var span = cell.colSpan || 1;
          if (span === 1 && heads[column] && !cell.hasAttribute("data-label")) {
            cell.setAttribute("data-label", heads[column].textContent.trim());
          }
          column += span;
        });
      });
    });
  }
  function start() {
    label(document);
    new MutationObserver(function () { label(document); })
      .observe(document.body, { childList: true, subtree: true });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
