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
  document.addEventListener("click", function (e) {
    var btn = e.target.closest ? e.target.closest("button.copy") : null;
    if (!btn) return;
    var el = document.querySelector(btn.dataset.copy);
    if (el && navigator.clipboard) {
      navigator.clipboard.writeText(el.textContent).then(function () { btn.textContent = "copied"; });
    }
  });
})();
