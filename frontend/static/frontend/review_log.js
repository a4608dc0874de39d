// The log's counts per facet come from /review/facets (one query per facet) after the
// rows are on screen; each count links to the log narrowed to that value.
(function () {
  "use strict";
  const box = document.getElementById("facets");
  if (!box) return;
  fetch(box.dataset.src, { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then((r) => r.json().then((body) => ({ ok: r.ok, body })))
    .then(({ ok, body }) => {
      box.textContent = "";
      if (!ok) {
        box.textContent = body.detail || "The counts could not be loaded.";
        return;
      }
      for (const [name, values] of Object.entries(body.facets)) {
        if (!values.length) continue;
        const facet = document.createElement("div");
        facet.className = "facet";
        facet.dataset.facet = name;
        const title = document.createElement("b");
        title.textContent = name;
        facet.append(title);
        for (const [value, count] of values) {
          const url = new URL(window.location.href);
          url.searchParams.set(name, value);
          url.searchParams.delete("page");
          const link = document.createElement("a");
          link.className = "count";
          link.dataset.value = value;
          link.href = url.pathname + url.search;
          link.append(value + " ");
          const n = document.createElement("i");
          n.textContent = String(count);
          link.append(n);
          facet.append(link);
        }
        box.append(facet);
      }
    })
    .catch(() => { box.textContent = "The counts could not be loaded."; });
})();
