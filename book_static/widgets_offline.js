// Loaded after require.js and before the widget manager (_config.yml, nb_ipywidgets_js). Two fixes so that the
// saved widget state renders offline with no console error:
// 1. The widget manager loads its icon fonts from "@jupyter-widgets/html-manager/dist/", which requirejs resolves
//    next to the page (chapters/@jupyter-widgets/...: not found). Map it to the copy served in _static/.
// 2. The widget manager typesets labels with MathJax 2's MathJax.Hub.Queue; the book loads MathJax 3, which has
//    MathJax.typesetPromise instead. Give every MathJax object the page ends up with a Hub.Queue that calls it.
(function () {
  var script = document.currentScript && document.currentScript.src;
  if (window.require && window.require.config && script) {
    var staticDir = script.slice(0, script.lastIndexOf("/") + 1);
    window.require.config({ paths: { "@jupyter-widgets/html-manager/dist": staticDir + "html-manager/dist" } });
  }

  var hub = {
    Queue: function (job) {
      var element = job && job[2];
      var mathjax = window.MathJax;
      if (mathjax && typeof mathjax.typesetPromise === "function") {
        mathjax.typesetPromise(element ? [element] : undefined).catch(function () {});
      }
    },
  };
  function withHub(value) {
    if (value && typeof value === "object" && !value.Hub) {
      value.Hub = hub;
    }
    return value;
  }
  // MathJax 3 replaces window.MathJax when it starts: catch that assignment too.
  var current = withHub(window.MathJax);
  try {
    Object.defineProperty(window, "MathJax", {
      configurable: true,
      get: function () {
        return current;
      },
      set: function (value) {
        current = withHub(value);
      },
    });
  } catch (error) {
    window.MathJax = current;
  }
})();

// 3. A live figure (ipywidgets Image) carries its text alternative as a tooltip (manyheads.viz.live.describe_figure):
//    give it to screen readers as the image's alt text once the widget manager has drawn it.
(function () {
  function label(root) {
    var images = (root.querySelectorAll ? root : document).querySelectorAll("img.widget-image:not([alt])");
    images.forEach(function (img) {
      img.setAttribute("alt", img.getAttribute("title") || "A figure that the controls above redraw.");
    });
  }
  if (window.MutationObserver) {
    new MutationObserver(function () {
      label(document);
    }).observe(document.documentElement, { childList: true, subtree: true });
  }
  document.addEventListener("DOMContentLoaded", function () {
    label(document);
  });
})();
