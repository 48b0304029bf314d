// Keep the context slider (log2 of tokens) and the typed context in step, and copy commands.
(function () {
  function fmt(tokens) {
    if (tokens >= 1048576 && tokens % 1048576 === 0) return tokens / 1048576 + "M";
    if (tokens % 1024 === 0) return tokens / 1024 + "k";
    return String(tokens);
  }
  function bind() {
    var slider = document.getElementById("ctx-slider");
    var box = document.getElementById("context");
    if (!slider || !box || slider.dataset.bound) return;
    slider.dataset.bound = "1";
    slider.addEventListener("input", function () {
      var tokens = Math.round(Math.pow(2, parseFloat(slider.value)) / 1024) * 1024;
      box.value = fmt(tokens);
    });
    slider.addEventListener("change", function () {
      box.dispatchEvent(new Event("change", { bubbles: true }));
    });
  }
  document.addEventListener("DOMContentLoaded", bind);
  // A blank optional field is the default either way: leave it out of the request, so the
  // URL a plan is shared by names only what was set (a cleared context or sequence count
  // still goes, and is refused as blank).
  document.addEventListener("htmx:configRequest", function (e) {
    var data = e.detail.formData;
    if (!data || e.detail.verb !== "get") return;
    var kept = { context: 1, sequences: 1, model: 1 };
    Array.from(new Set(data.keys())).forEach(function (k) {
      if (!kept[k] && data.getAll(k).every(function (v) { return v === ""; })) data.delete(k);
    });
  });
  document.addEventListener("click", function (e) {
    var btn = e.target.closest ? e.target.closest("button.copy") : null;
    if (!btn) return;
    var el = document.querySelector(btn.dataset.copy);
    if (el && navigator.clipboard) {
      navigator.clipboard.writeText(el.textContent).then(function () { btn.textContent = "copied"; });
    }
  });
})();
