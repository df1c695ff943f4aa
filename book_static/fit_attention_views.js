// bertviz's model view draws every layer x head as thumbnails in a fixed-size SVG (970 px wide for 12 heads), wider
// than the page's text column: heads 8-11 hid behind a scrollbar, and more at phone width. Give each such SVG a
// viewBox so that it scales down to the column's width (the thumbnails stay clickable: d3 maps the clicks).
(function () {
  function fit() {
    document.querySelectorAll('[id^="bertviz"] svg[width]').forEach(function (svg) {
      var width = parseFloat(svg.getAttribute("width"));
      var height = parseFloat(svg.getAttribute("height"));
      if (!width || !height) return;
      if (svg.getAttribute("viewBox") !== "0 0 " + width + " " + height) {
        svg.setAttribute("viewBox", "0 0 " + width + " " + height);
      }
      svg.style.maxWidth = "100%";
      svg.style.height = "auto";
    });
  }
  if (window.MutationObserver) {
    new MutationObserver(fit).observe(document.documentElement, { childList: true, subtree: true, attributes: true,
      attributeFilter: ["width", "height"] });
  }
  document.addEventListener("DOMContentLoaded", fit);
})();
