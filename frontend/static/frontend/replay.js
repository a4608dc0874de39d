// Episode replay: one step at a time, keyboard ←/→, a scrubber, and ?step=N kept in the URL
// so a link (from the intervention log) lands on the right step and a reload stays there.
(function () {
  "use strict";
  const steps = Array.from(document.querySelectorAll(".replay-step"));
  const scrubber = document.getElementById("step-scrubber");
  const position = document.getElementById("step-position");
  if (!steps.length || !scrubber) return;
  const current = document.getElementById("replay").dataset.current;
  let at = Math.max(0, steps.findIndex((s) => s.dataset.step === current));

  function show(i) {
    at = Math.min(steps.length - 1, Math.max(0, i));
    steps.forEach((s, n) => { s.hidden = n !== at; });
    scrubber.value = String(at);
    const number = steps[at].dataset.step;
    position.textContent = `Step ${number} (${at + 1} of ${steps.length})`;
    const url = new URL(window.location.href);
    url.searchParams.set("step", number);
    window.history.replaceState(null, "", url);
  }

  scrubber.addEventListener("input", () => show(Number(scrubber.value)));
  document.getElementById("prev-step").addEventListener("click", () => show(at - 1));
  document.getElementById("next-step").addEventListener("click", () => show(at + 1));
  document.addEventListener("keydown", (event) => {
    if (event.target.closest("input:not([type=range]), textarea, select")) return;
    if (event.key === "ArrowLeft") { event.preventDefault(); show(at - 1); }
    if (event.key === "ArrowRight") { event.preventDefault(); show(at + 1); }
  });
  show(at);
})();
