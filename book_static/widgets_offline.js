// Loaded after require.js and before the widget manager (_config.yml, nb_ipywidgets_js). Two fixes so that the
// saved widget state renders offline with no console error (and waits for slow module loads):
// 1. The widget manager loads its icon fonts from "@jupyter-widgets/html-manager/dist/", which requirejs resolves
//    next to the page (chapters/@jupyter-widgets/...: not found). Map it to the copy served in _static/.
// 2. The widget manager typesets labels with MathJax 2's MathJax.Hub.Queue; the book loads MathJax 3, which has
//    MathJax.typesetPromise instead. Give every MathJax object the page ends up with a Hub.Queue that calls it.
(function () {
  var script = document.currentScript && document.currentScript.src;
  if (window.require && window.require.config && script) {
    var staticDir = script.slice(0, script.lastIndexOf("/") + 1);
    window.require.config({
      paths: { "@jupyter-widgets/html-manager/dist": staticDir + "html-manager/dist" },
      // requirejs gives up on a module after 7 s by default, and the widgets then fail to draw on a slow phone or a
      // busy machine ("Could not create a view for model id ..."): wait as long as it takes.
      waitSeconds: 0,
    });
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

// 3. A live figure (ipywidgets Image) has its text alternative in a visually hidden element next to it
//    (manyheads.viz.live: class mh-figure-alt): make it the image's alt text once the widget manager has drawn both.
(function () {
  var FALLBACK = "A figure that the controls above redraw.";
  function label() {
    document.querySelectorAll("img.widget-image").forEach(function (img) {
      var words = img.parentElement && img.parentElement.querySelector(".mh-figure-alt");
      if (words && img.getAttribute("alt") !== words.textContent) {
        img.setAttribute("alt", words.textContent);
        words.setAttribute("aria-hidden", "true"); // said once, as the alt text
      } else if (!words && !img.hasAttribute("alt")) {
        img.setAttribute("alt", FALLBACK);
      }
    });
  }
  if (window.MutationObserver) {
    new MutationObserver(label).observe(document.documentElement, { childList: true, subtree: true });
  }
  document.addEventListener("DOMContentLoaded", label);
})();
